import Synchronization

/// A non-recursive mutex whose critical sections may read and return state stored outside it.
///
/// `Mutex<Value>` guards a value it owns; LoopRuntime's locks guard fields of several objects
/// (a loop's mode table and the bookkeeping its items keep for it), so this wraps a `Mutex<Void>`
/// and lets the body return any value. Never call out to user code while holding one.
final class LoopLock: Sendable {
    private let mutex = Mutex<Void>(())

    init() {}

    /// Runs `body` with the lock held and returns its result.
    @inline(__always)
    func withLock<R>(_ body: () -> R) -> R {
        var result: R? = nil
        mutex.withLock { _ in result = body() }
        return result.unsafelyUnwrapped
    }
}
