import LoopRuntime

extension LoopThread {
    /// Shuts the thread down like `shutdown()` and returns once it has ended, suspending the
    /// calling task instead of blocking its thread. Idempotent.
    ///
    /// Awaited on the thread itself (from an actor pinned to it), it requests the shutdown and
    /// returns at once: the shutdown cannot finish while the awaiting job runs. The call stays in
    /// the caller's isolation (`isolation` defaults to it); a caller pinned to another loop is
    /// resumed by that loop.
    ///
    /// - Important: Safe from any task.
    public func shutdown(isolation: isolated (any Actor)? = #isolation) async {
        await loop.waitOnce("LoopThread.shutdown", isolation: isolation, fallback: {}) { completion in
            if !shutdown(then: { completion.complete(()) }) { completion.complete(()) }
        }
    }
}

extension LoopThreadGroup {
    /// Shuts every thread of the group down at once (see `LoopThread.shutdown()`) and returns once
    /// they have all ended, suspending the calling task instead of blocking its thread. Idempotent.
    ///
    /// The threads drain in parallel: the call takes as long as the slowest drain, not the sum.
    /// Awaited on one of the group's own threads (from an actor pinned to it), it requests every
    /// thread's shutdown and returns at once, as `LoopThread.shutdown(isolation:)` does there: that
    /// thread cannot end while the awaiting job runs, and a task waiting on it for the others would
    /// find it ended when they answered. The call stays in the caller's isolation (`isolation`
    /// defaults to it).
    ///
    /// ```swift
    /// let group = try LoopThreadGroup(name: "io")
    /// …
    /// await group.shutdown()
    /// ```
    ///
    /// - Important: Safe from any task.
    public func shutdown(isolation: isolated (any Actor)? = #isolation) async {
        if threads.contains(where: { $0.loop.isCurrentThread }) {
            for thread in threads { _ = thread.shutdown(then: {}) }
            return
        }
        let remaining = ExecutorLocked(threads.count)
        guard let loop = threads.first?.loop else { return }
        await loop.waitOnce("LoopThreadGroup.shutdown", isolation: isolation, fallback: {}) { completion in
            let oneEnded: @Sendable () -> Void = {
                if remaining.withLock({ count in
                    count -= 1
                    return count == 0
                }) {
                    completion.complete(())
                }
            }
            for thread in threads where !thread.shutdown(then: oneEnded) { oneEnded() }
        }
    }
}
