import LoopRuntime

extension Loop {
    /// Runs `body` on the loop's thread in one of `modes` and returns its result to the awaiting
    /// task, or throws what it threw.
    ///
    /// The body is queued as a block, exactly like `Loop.perform(inModes:_:)`: it
    /// runs at the next block step of a pass in one of `modes` (SPEC R57–R59). The calling task
    /// is suspended meanwhile; no thread is blocked. Use it to reach a loop's thread-affine state
    /// from async code once, without pinning an actor to the loop:
    ///
    /// ```swift
    /// let rows = try await worker.loop.submit { database.query("SELECT count(*) FROM jobs") }
    /// ```
    ///
    /// Awaiting it on the loop's own thread (from an actor pinned to the loop, say) is fine: the
    /// body runs at the loop's next block step, after the caller has suspended. It waits for as
    /// long as the loop does not run one of `modes`, as every block does.
    ///
    /// Cancelling the awaiting task does not withdraw the body: it is already queued, and the
    /// call returns when the body has run.
    ///
    /// - Parameters:
    ///   - modes: The modes the body may run in; must not be empty. Defaults to `Loop.Mode.common`.
    ///   - label: The name of the body's callout in stall reports and traces; defaults to
    ///     `"Loop.submit"`.
    ///   - isolation: The caller's isolation, which the task stays in (the default is right). A
    ///     caller pinned to a loop is resumed by a job of that loop, even while it shuts down.
    ///   - body: The work, run once on the loop's thread.
    /// - Returns: What `body` returned.
    /// - Throws: What `body` threw; or ``LoopEndedError`` if the loop had ended, or ended before it
    ///   ran the body (the body then never runs).
    /// - Precondition: not awaited on a loop that nothing will run (`Loop.current` on a thread of
    ///   Swift's cooperative pool): it traps with a message instead of waiting for ever.
    /// - Important: Safe from any thread and any task.
    public func submit<Value: Sendable>(
        inModes modes: [Mode] = [.common],
        label: StaticString? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: @escaping @Sendable () throws -> Value
    ) async throws -> Value {
        preconditionSomeMode(modes, in: "Loop.submit(inModes:label:isolation:_:)", of: "the \(self)", queuing: "body")
        preconditionSomeoneRunsTheLoop("Loop.submit")
        let result: Result<Value, any Error> = await waitOnce(
            "Loop.submit", isolation: isolation, fallback: { .failure(self.endedError) }
        ) { completion in
            let block: @Sendable () -> Void = { completion.complete(Result(catching: body)) }
            let queued =
                modes == [.common] && label == nil
                ? perform(commonSubmitBlocks, block) : perform(inModes: modes, label: label ?? "Loop.submit", block)
            if !queued { completion.complete(.failure(self.endedError)) }
        }
        return try result.get()
    }
}

extension LoopThread {
    /// Runs `body` on the thread's loop in one of `modes` and returns its result to the awaiting
    /// task, or throws what it threw: ``LoopRuntime/Loop/submit(inModes:label:isolation:_:)`` for a `LoopThread`,
    /// refused as soon as a shutdown has begun.
    ///
    /// ```swift
    /// let handle = try await sqliteThread.submit { try Database.open(path) }
    /// ```
    ///
    /// A body accepted before the shutdown runs in the shutdown's drain, and its result is
    /// returned.
    ///
    /// - Parameters:
    ///   - modes: The modes the body may run in; must not be empty. Defaults to `Loop.Mode.common`.
    ///   - label: The name of the body's callout in stall reports and traces; defaults to
    ///     `"LoopThread.submit"`.
    ///   - isolation: The caller's isolation, which the task stays in (the default is right).
    ///   - body: The work, run once on the thread.
    /// - Returns: What `body` returned.
    /// - Throws: What `body` threw; `LoopThreadError.shutDown(thread:)` if a shutdown
    ///   had begun (the body was not queued); ``LoopEndedError`` should the loop end without running it.
    /// - Important: Safe from any thread and any task.
    public func submit<Value: Sendable>(
        inModes modes: [Loop.Mode] = [.common],
        label: StaticString? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: @escaping @Sendable () throws -> Value
    ) async throws -> Value {
        preconditionSomeMode(modes, in: "LoopThread.submit(inModes:label:isolation:_:)", of: "\(self)", queuing: "body")
        let result: Result<Value, any Error> = await loop.waitOnce(
            "LoopThread.submit", isolation: isolation, fallback: { [loop] in .failure(loop.endedError) }
        ) { completion in
            do {
                try perform(inModes: modes, label: label ?? "LoopThread.submit") {
                    completion.complete(Result(catching: body))
                }
            } catch {
                completion.complete(.failure(error))
            }
        }
        return try result.get()
    }
}

/// `Loop.submit`'s blocks in the common modes (the default), labelled without an allocation per
/// block.
private let commonSubmitBlocks = PreparedBlockModes([.common], label: "Loop.submit")
