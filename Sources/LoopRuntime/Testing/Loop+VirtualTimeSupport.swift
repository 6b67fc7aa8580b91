// What a test loop on virtual time asks of a loop: whether its clock is virtual, and whether a
// wait that never advances is a stall (jobs queued for a mode the loop is not in).

extension Loop {
    /// True if the loop runs on a virtual clock (a test loop): ``now`` is not `ContinuousClock.now`.
    /// Support for executors that receive deadlines on `ContinuousClock` and must place them on
    /// the loop's own clock.
    ///
    /// - Important: Safe from any thread (fixed when the loop is made).
    package var hasVirtualClock: Bool { waitsOnVirtualTime }

    /// The modes of an executor queue with jobs queued that cannot run in the mode the loop sleeps
    /// in, and that mode; `nil` if there is none (or the loop is not asleep).
    var jobsWaitingForAnotherMode: (modes: [Mode], sleeping: Mode)? {
        lock.withLock {
            guard let mode = state.sleepingMode else { return nil }
            for queue in state.jobQueues where !queue.matches(mode) && queue.hasQueuedWork {
                return (queue.modes, mode.mode)
            }
            return nil
        }
    }
}
