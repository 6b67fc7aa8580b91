import Dispatch
import LoopExecutor
import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// A thread-safe log.
final class Trace: @unchecked Sendable {
    // Guarded by `lock`.
    private let lock = NSLockLike()
    private var events: [String] = []

    func append(_ event: String) { lock.withLock { events.append(event) } }
    var all: [String] { lock.withLock { events } }
    var text: String { all.joined(separator: " ") }
}

/// A pthread mutex (visible to the thread sanitizer) for test helpers.
final class NSLockLike: @unchecked Sendable {
    // The mutex lives at a stable address for the life of the object.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t> = {
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        return mutex
    }()

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// Polls `condition` every millisecond until it holds or `timeout` passes, without blocking a
/// thread of the cooperative pool (tasks the condition waits for need those threads).
///
/// The timeout counts the time this task was able to look, not the time that passed: a poll that
/// comes back late counts for at most 100 ms. Most of the suite's tests are synchronous (they run a
/// loop on the calling thread), and under the sanitizers a few of them hold every thread of the
/// cooperative pool (one per core) for 20 s at a time. A wait that counted that stretch gave up
/// without having looked, and before the task it waits for had run at all (seen once in CI: a
/// delayed submission "never started").
func eventually(timeout: Duration = .seconds(20), _ condition: () -> Bool) async -> Bool {
    var looked = Duration.zero
    var last = ContinuousClock.now
    while looked < timeout {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(1))
        let now = ContinuousClock.now
        looked += min(now - last, .milliseconds(100))
        last = now
    }
    return condition()
}

extension DispatchSemaphore {
    /// Waits for a signal without blocking a thread of the cooperative pool.
    func waitAsync() async {
        while wait(timeout: .now()) != .success {
            try? await Task.sleep(for: .milliseconds(1))
        }
    }
}

/// An actor pinned to a loop thread that records on which thread each call ran.
actor Pinned: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    private(set) var calls = 0
    private(set) var wrongThread = 0
    private var lastBySender: [Int: Int] = [:]
    private(set) var outOfOrder = 0

    init(_ executor: LoopExecutor) {
        loopExecutor = executor
    }

    func call(sender: Int = 0, sequence: Int = 0) {
        if !loopExecutor.loop.isCurrentThread { wrongThread += 1 }
        if let last = lastBySender[sender], last + 1 != sequence { outOfOrder += 1 }
        lastBySender[sender] = sequence
        calls += 1
    }

    func onLoopThread() -> Bool { loopExecutor.loop.isCurrentThread }
}
