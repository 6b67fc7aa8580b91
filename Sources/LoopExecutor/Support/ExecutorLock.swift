import CLoopRuntimeShims

// Why LoopExecutor has locks of its own, on the engine's C lock, rather than LoopRuntime's
// `LoopLock` and `Locked`.
//
// Swift 6.3.1 does not inline or specialize a member of a `package` type in another module, even
// marked `@inlinable` (without library evolution there is no package-wide serialization). The
// engine's generic `withLock` called from here is then an unspecialized call with a closure
// context on every critical section: the activity stream's observer callout took 25% more
// instructions (callgrind) and ~40% more time than when the lock was public SPI (BENCHMARKS.md,
// issue #33). These are internal, so every `withLock` below is specialized and inlined into its
// caller, and the only call left is the C lock itself, as in the engine.

/// A non-recursive mutex whose critical sections may read and return state stored outside it (a
/// mailbox's state and its parking spot's slot share one).
///
/// The engine's futex lock (`cloop_lock_acquire`), which the thread sanitizer instruments, so
/// every critical section here is visible to it (`Synchronization.Mutex` takes its contended path
/// in uninstrumented standard-library code). Never call out to user code while holding it.
final class ExecutorLock: @unchecked Sendable {  // `word` is only touched by the C lock's atomics
    /// Only touched by the C lock's atomics. Owned by the lock and freed by its deinit, so it
    /// lives as long as anyone can lock it: every user holds the lock strongly (a parking spot
    /// holds its mailbox's).
    private let word: UnsafeMutablePointer<UInt32>

    init() {
        word = .allocate(capacity: 1)
        word.initialize(to: 0)
    }

    deinit {
        word.deallocate()
    }

    /// Runs `body` with the lock held and returns its result.
    @inline(__always)
    func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        cloop_lock_acquire(word)
        defer { cloop_lock_release(word) }
        return try body()
    }
}

/// A value and the lock that guards it. Values taken out of it must be safe to use on the thread
/// that takes them (Sendable, or handed over under the lock).
final class ExecutorLocked<Value>: @unchecked Sendable {  // `value` only touched with `lock` held
    private let lock = ExecutorLock()
    // Unchecked: `withLock` is the only access, and the lock makes it exclusive.
    @exclusivity(unchecked) private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` on the value with the lock held. Never call out to user code inside.
    @inline(__always)
    func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        try lock.withLock { () throws(E) -> R in try body(&value) }
    }
}
