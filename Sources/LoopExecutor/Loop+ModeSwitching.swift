import LoopRuntime

extension Loop {
    /// Leaves the mode the loop runs and re-enters it in `mode` — the immediate switch — and returns
    /// once the loop has entered it.
    ///
    /// The loop must be driven by a `LoopDriver` (every `LoopThread`
    /// is). The current run call is stopped and the driver re-enters in `mode`: items of the old mode
    /// freeze, items of both keep running, common items follow (SPEC R34, R63). The call returns
    /// when the first pass in `mode` has started (or when the drive ends first).
    ///
    /// Await it from code that can run while the loop is in `mode`: a task on another thread, or an
    /// actor whose executor's modes include `mode`. An actor pinned to `[.default]` that switches
    /// to a mode outside the common set waits until the loop comes back (it is paused there, by
    /// design).
    ///
    /// - Precondition: the loop is driven by a `LoopDriver`.
    /// - Important: Safe from any task.
    public func switchMode(to mode: Mode) async {
        guard let driver = self.driver else {
            preconditionFailure(
                "Loop.switchMode(to:): the \(self) is not driven by a LoopDriver. Mode switching needs a driver to re-enter the loop: use a LoopThread, or run the loop with LoopDriver(loop:).run()."
            )
        }
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            driver.switchMode(to: mode) { continuation.resume() }
        }
    }

    /// Runs `body` while the loop runs `mode`, then switches back to the mode it ran before — also
    /// when `body` throws or its task is cancelled.
    ///
    /// ```swift
    /// try await thread.loop.withMode("tracking") {
    ///     try await followTheDrag()   // default-mode timers pause meanwhile
    /// }
    /// ```
    ///
    /// `body` runs in the caller's isolation (`isolation` defaults to it).
    ///
    /// - Precondition: the loop is driven by a `LoopDriver` (see ``switchMode(to:)``).
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws.
    /// - Important: Safe from any task.
    public func withMode<Result>(
        _ mode: Mode,
        isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws -> Result
    ) async rethrows -> Result {
        guard let driver = self.driver else {
            preconditionFailure(
                "Loop.withMode(_:_:): the \(self) is not driven by a LoopDriver. Use a LoopThread, or run the loop with LoopDriver(loop:).run()."
            )
        }
        let previous = driver.mode
        await switchMode(to: mode)
        do {
            let result = try await body()
            await switchMode(to: previous)
            return result
        } catch {
            await switchMode(to: previous)
            throw error
        }
    }
}
