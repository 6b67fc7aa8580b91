import CLoopRuntimeShims
import Foundation
import Synchronization

/// The reference serial executor of issue #35: the shape of SwiftNIO's `SelectableEventLoop`,
/// written small. One thread blocked in `epoll_wait` on an eventfd; a job queue behind a mutex; a
/// producer appends under the lock and writes the eventfd only if the thread is blocked and no
/// write is already on its way (NIO's external-task path, with its wake-up coalescing). It has none
/// of a loop's features — modes, timers, observers, lifecycle — so it is the floor of "a thread
/// that runs jobs handed to it from other threads", measured in the same run as the loop.
final class ReferenceSerialExecutor: SerialExecutor, @unchecked Sendable {
    // Thread-safety: `state` is a Mutex; `epoll`, `event` and `ready` are set in init and only
    // read after; `ready` is used by the executor's thread alone.
    private struct State {
        var jobs: [UnownedJob] = []
        var spare: [UnownedJob] = []
        /// The thread is in (or about to enter) `epoll_wait`, and no write is pending.
        var blocked = false
        var stopping = false
    }

    private let state = Mutex(State())
    private let epoll = cloop_epoll_create()
    private let event = cloop_eventfd_create()
    private let ready = cloop_epoll_events_alloc(1)
    private var thread: Thread!
    private let finished = DispatchSemaphore(value: 0)

    init() {
        _ = cloop_epoll_ctl(epoll, cloop_epoll_ctl_add(), event, CLOOP_EPOLLIN, 0)
        thread = Thread { [self] in run() }
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let unowned = UnownedJob(job)
        let wake = state.withLock { state in
            state.jobs.append(unowned)
            guard state.blocked else { return false }
            state.blocked = false
            return true
        }
        if wake { _ = cloop_eventfd_signal(event) }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Stops the thread after the jobs queued so far, and waits for it.
    func shutdown() {
        let wake = state.withLock { state in
            state.stopping = true
            defer { state.blocked = false }
            return state.blocked
        }
        if wake { _ = cloop_eventfd_signal(event) }
        finished.wait()
        cloop_epoll_events_free(ready)
        close(event)
        close(epoll)
    }

    private func run() {
        while true {
            var batch: [UnownedJob] = []
            let stop: Bool = state.withLock { state in
                if state.jobs.isEmpty {
                    if state.stopping { return true }
                    state.blocked = true
                    return false
                }
                swap(&batch, &state.jobs)
                swap(&state.jobs, &state.spare)
                return false
            }
            if stop { break }
            if batch.isEmpty {
                while cloop_epoll_wait(epoll, ready, 1, -1) < 1 {}
                _ = cloop_eventfd_drain(event)
                continue
            }
            for job in batch { job.runSynchronously(on: asUnownedSerialExecutor()) }
            batch.removeAll(keepingCapacity: true)
            state.withLock { state in
                if state.spare.capacity < batch.capacity { swap(&state.spare, &batch) }
            }
        }
        finished.signal()
    }
}

/// An actor on the reference executor, for the same round trips as the loop-pinned `Counter`.
actor ReferenceCounter: Incrementing {
    nonisolated let executor: ReferenceSerialExecutor
    nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    private var total = 0
    init(executor: ReferenceSerialExecutor) { self.executor = executor }
    func increment(_ value: Int) -> Int {
        total &+= value
        return total
    }
}
