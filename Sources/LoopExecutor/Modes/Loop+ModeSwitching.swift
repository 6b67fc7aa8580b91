import LoopRuntime

extension Loop {
    /// Leaves the mode the loop runs and re-enters it in `mode` — the immediate switch — and returns
    /// once the loop has entered it.
    ///
    /// The loop must be driven by a `LoopDriver` (every `LoopThread`
    /// is). The current run call is stopped and the driver re-enters in `mode`: items of the old mode
    /// freeze, items of both keep running, common items follow (SPEC R34, R63). The call returns
    /// when the first pass in `mode` has started, or when the drive ends first — for a `LoopThread`
    /// that shuts down meanwhile or already has, at once.
    ///
    /// Await it from code that can run while the loop is in `mode`: a task on another thread, or an
    /// actor whose executor's modes include `mode`. An actor pinned to `[.default]` that switches
    /// to a mode outside the common set waits until the loop comes back (it is paused there, by
    /// design).
    ///
    /// The call stays in the caller's isolation (`isolation` defaults to it), so an actor pinned to
    /// the loop is resumed by a job of the loop itself.
    ///
    /// - Returns: `true` if the loop entered `mode`; `false` if it did not: the drive ended first
    ///   (the loop is shutting down or has ended, or its `LoopDriver` was stopped), or a switch to
    ///   another mode came before the loop entered this one.
    /// - Precondition: the loop is driven by a `LoopDriver`, or has stopped accepting work.
    /// - Important: Safe from any task.
    @discardableResult
    public func switchMode(to mode: Mode, isolation: isolated (any Actor)? = #isolation) async -> Bool {
        guard let driver = self.driver else {
            // A LoopThread whose shutdown began has stopped (or is about to stop) its driver.
            guard isOpen else { return false }
            preconditionFailure(
                "Loop.switchMode(to:): the \(self) is not driven by a LoopDriver. Mode switching needs a driver to re-enter the loop: use a LoopThread, or run the loop with LoopDriver(loop:).run()."
            )
        }
        return await switchMode(to: mode, with: driver, isolation: isolation) == .entered
    }

    /// The switch through `driver`, found once by the caller (a second lookup may find none: the
    /// drive ended meanwhile). The driver answers exactly once.
    private func switchMode(
        to mode: Mode, with driver: LoopDriver, isolation: isolated (any Actor)?
    ) async -> LoopDriver.SwitchOutcome {
        await waitOnce("Loop.switchMode", isolation: isolation, fallback: { .driveEnded }) { completion in
            driver.switchMode(to: mode, reporting: { outcome in completion.complete(outcome) })
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
    /// Code that cannot run while the loop is in `mode` must not call it, since `body` would wait
    /// for the loop to leave `mode` and only the end of `body` makes it leave. The call traps with
    /// a message in the two cases it can see: an actor or task on one of this loop's executors
    /// whose modes do not include `mode`, and the main actor on `Loop.main` with a
    /// mode outside the common set. One it cannot see: on the main loop, main-actor work and
    /// `DispatchQueue.main` run only in common modes (as in CFRunLoop), so a `body` that awaits
    /// `MainActor.run { … }` from elsewhere waits until the switch back — for ever. Make the mode
    /// common first (`Loop.addCommonMode(_:)`) when the body needs the main actor.
    ///
    /// `body` runs in the caller's isolation (`isolation` defaults to it). If the loop's drive ends
    /// before it entered `mode` (its `LoopThread` is shutting down), `body` does not run and the
    /// call throws ``LoopEndedError``; if it ends while `body` runs, `body` finishes and its result
    /// is returned (there is no mode left to switch back to).
    ///
    /// - Precondition: the loop is driven by a `LoopDriver` (see ``switchMode(to:isolation:)``), and the
    ///   caller can run while the loop is in `mode` (see above).
    /// - Returns: What `body` returns.
    /// - Throws: ``LoopEndedError`` if the drive ended before the loop entered `mode`;
    ///   ``LoopModeSupersededError`` if another switch came first (the loop went to another mode
    ///   instead); what `body` throws. In the first two cases `body` does not run.
    /// - Important: Safe from any task.
    public func withMode<Result>(
        _ mode: Mode,
        isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws -> Result
    ) async throws -> Result {
        guard let driver = self.driver else {
            guard isOpen else { throw endedError }
            preconditionFailure(
                "Loop.withMode(_:_:): the \(self) is not driven by a LoopDriver. Use a LoopThread, or run the loop with LoopDriver(loop:).run()."
            )
        }
        preconditionCallerRuns(in: mode, isolation: isolation, "Loop.withMode(_:_:)")
        let previous = driver.mode
        switch await switchMode(to: mode, with: driver, isolation: isolation) {
        case .entered: break
        case .superseded: throw LoopModeSupersededError(mode: mode, loop: description)
        case .driveEnded: throw endedError
        }
        // Back through the same driver: if its drive has ended meanwhile, the switch back is
        // answered at once and there is no mode to restore.
        do {
            let result = try await body()
            _ = await switchMode(to: previous, with: driver, isolation: isolation)
            return result
        } catch {
            _ = await switchMode(to: previous, with: driver, isolation: isolation)
            throw error
        }
    }
}
