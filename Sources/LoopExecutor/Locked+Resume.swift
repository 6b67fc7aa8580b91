@_spi(LoopExecutorSupport) import LoopRuntime

// Why the async bridges resume their continuations inside their storage's lock, and touch that lock
// again right after the `await` returns (when they take out the seal hold, below).
//
// When a continuation is resumed before its task has finished suspending (the loop thread resumes
// it while the awaiting task is still between handing the continuation over and parking), the
// runtime lets the task run on inline, and the only synchronization between the two threads is an
// atomic in the concurrency runtime, which the thread sanitizer does not instrument. The sanitizer
// then reports the resumer's access to the continuation's context and the task's next use of the
// same task-allocator memory (its next frame) as a race — under load, when the interleaving is
// common. Resuming inside a lock that the awaiting side takes once it is past the `await` makes the
// hand-off visible: the task cannot pass the `await` before the resumer holds the lock, and it then
// waits for the resumer to release it. (Resuming only enqueues the task's job; no user code runs
// inside the lock.)

// Why a resumer takes a seal hold on the loop the resumed task will hop onto.
//
// A resumed continuation does not go straight to the awaiting actor's executor: the task is first
// enqueued on the global pool, and only there hops onto the actor's executor — a job for the loop,
// enqueued some time later. A shutdown that sealed the loop in between would turn that hop into a
// job enqueued after the end (a trap). So whoever resumes a waiter whose isolation is pinned to a
// loop first takes a hold on that loop (`Loop.holdSeal()`), and the task, once back in its
// isolation, releases it; the drain does not seal while holds are out.

/// The loop whose executor `isolation` runs on, if it is a ``LoopExecutor``: the loop a task
/// waiting in that isolation hops onto when it is resumed.
func hopTarget(of isolation: (any Actor)?) -> Loop? {
    guard let isolation else { return nil }
    return (isolation.unownedExecutor.asSerialExecutor() as? LoopExecutor)?.loop
}

extension Optional where Wrapped == Loop {
    /// A seal hold on the wrapped loop for a waiter about to be resumed: the loop, if the hold was
    /// taken (see above), to be released by the resumed task.
    func holdForResume() -> Loop? {
        guard let loop = self, loop.holdSeal() else { return nil }
        return loop
    }
}

extension Locked {
    /// Resumes `continuation` with `value` with the lock held (see above).
    @inlinable
    func resume<T: Sendable>(_ continuation: UnsafeContinuation<T, Never>, returning value: T) {
        withLock { _ in continuation.resume(returning: value) }
    }

    /// Resumes `continuation` with `result` with the lock held (see above).
    @inlinable
    func resume<T: Sendable>(_ continuation: UnsafeContinuation<T, any Error>, with result: Result<T, any Error>) {
        withLock { _ in continuation.resume(with: result) }
    }
}
