import CLoopRuntimeShims
import Synchronization

/// A futex mutex on a word with a stable address. Not owning: see ``LoopLock``, ``Locked`` and
/// ``LockStripes`` for the owners of the words.
///
/// The lock's atomics are in the C shim, which the thread sanitizer instruments, so every
/// critical section of the engine is visible to it. (`Synchronization.Mutex` takes its contended
/// path in uninstrumented standard-library code, which makes the sanitizer report races on data
/// that is in fact guarded.) Never call out to user code while holding one.
struct RawLock: @unchecked Sendable {  // the word is only touched by the C lock's atomics
    // The word is only touched through the C lock functions.
    let word: UnsafeMutablePointer<UInt32>

    @inline(__always)
    func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        cloop_lock_acquire(word)
        defer { cloop_lock_release(word) }
        return try body()
    }
}

/// A non-recursive mutex whose critical sections may read and return state stored outside it.
///
/// A loop's lock guards fields of several objects (its mode table and the bookkeeping its items
/// keep for it), so the lock does not own the data; every guarded field says so in a comment.
package final class LoopLock: Sendable {
    let raw: RawLock
    #if DEBUG
        /// How many times the lock was taken (debug builds only: tests pin how often the pass
        /// takes it).
        let acquisitions = Atomic<Int>(0)
    #endif

    /// A new, unlocked lock.
    package init() {
        let word = UnsafeMutablePointer<UInt32>.allocate(capacity: 1)
        word.initialize(to: 0)
        raw = RawLock(word: word)
    }

    deinit {
        raw.word.deallocate()
    }

    /// Runs `body` with the lock held and returns its result. Never call out to user code inside.
    ///
    /// Specialized and inlined only inside this module: Swift does not inline a `package` type's
    /// members in another module, so LoopExecutor's hot locks are its own (`ExecutorLock`).
    @inline(__always)
    package func withLock<R, E: Error>(_ body: () throws(E) -> R) throws(E) -> R {
        #if DEBUG
            countAcquisition()
        #endif
        return try raw.withLock(body)
    }

    #if DEBUG
        func countAcquisition() {
            acquisitions.add(1, ordering: .relaxed)
        }
    #endif
}

/// A value and the lock that guards it (an allocation of its own: for objects with few instances;
/// items that exist by the million use ``LockStripes``). Also used by `LoopTesting`, off the hot
/// paths (see ``LoopLock/withLock(_:)`` on why LoopExecutor has its own).
///
/// The lock is visible to the thread sanitizer (see ``RawLock``). Values taken out of it must be
/// safe to use on the thread that takes them (Sendable, or handed over under the lock).
package final class Locked<Value>: @unchecked Sendable {  // `value` only touched with `lock` held
    private let lock = LoopLock()
    // Unchecked: `withLock` is the only access, and the lock makes it exclusive (a dynamic check
    // here would cost two runtime calls per critical section).
    @exclusivity(unchecked) private var value: Value

    /// A lock guarding `value`.
    package init(_ value: Value) {
        self.value = value
    }

    /// Runs `body` on the value with the lock held. Never call out to user code inside.
    @inline(__always)
    package func withLock<R, E: Error>(_ body: (inout Value) throws(E) -> R) throws(E) -> R {
        try lock.withLock { () throws(E) -> R in try body(&value) }
    }
}

/// A fixed table of locks shared by the engine's items (timers, observers, sources): an item's
/// lock is picked by its address, so a million timers need no lock allocations.
///
/// Rule: never hold two stripe locks at once (two items may share a stripe, and the lock is not
/// recursive). The engine only nests a stripe inside a loop's lock.
enum LockStripes {
    private static let count = 64
    /// One word per 64-byte line, so that stripes do not share cache lines.
    private static let stride = 16
    nonisolated(unsafe) private static let words: UnsafeMutablePointer<UInt32> = {
        let words = UnsafeMutablePointer<UInt32>.allocate(capacity: count * stride)
        words.initialize(repeating: 0, count: count * stride)
        return words
    }()

    /// The lock of `object`.
    @inline(__always)
    static func lock(for object: AnyObject) -> RawLock {
        let address = UInt(bitPattern: ObjectIdentifier(object))
        let index = Int((address >> 4) ^ (address >> 12)) & (count - 1)
        return RawLock(word: words + index * stride)
    }
}

// A mirror of a locked field is written at every change of the field; rewriting an unchanged value
// would still take the cache line away from the loop thread that reads it. So: store (releasing)
// only what is new.
extension Atomic where Value == Bool {
    @inline(__always)
    func update(_ value: Bool) {
        if load(ordering: .relaxed) != value { store(value, ordering: .releasing) }
    }
}

extension Atomic where Value == Int {
    @inline(__always)
    func update(_ value: Int) {
        if load(ordering: .relaxed) != value { store(value, ordering: .releasing) }
    }
}

extension Atomic where Value == Int64 {
    @inline(__always)
    func update(_ value: Int64) {
        if load(ordering: .relaxed) != value { store(value, ordering: .releasing) }
    }
}
