@_spi(LoopExecutorSupport) import LoopRuntime

// Why the async bridges resume their continuations inside their storage's lock, and touch that lock
// again right after the `await` returns.
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

    /// Called by the awaiting task right after its `await` returned: orders everything the resumer
    /// did before resuming before what the task does next (see above).
    @inlinable
    func synchronizeWithResumer() {
        withLock { _ in }
    }
}
