/// What one run call is doing: fixed for the whole call (SPEC R8).
struct RunContext {
    let mode: ModeState
    /// Absolute loop time; ``LoopTime/distantFuture`` for none (SPEC R13).
    let deadline: Int64
    /// The timeout was ≤ 0 or the deadline had passed at entry: one non-blocking pass (SPEC R12).
    let zeroTimeout: Bool
    let returnAfterSourceHandled: Bool
    /// Index of this call's record in `state.runCalls`.
    let depth: Int
    /// The instruments recorded the call's start (they record its end too).
    let isRecorded: Bool
}

extension Loop {
    /// Runs the loop once in `mode` until `deadline`: entry, passes, exit (SPEC R8).
    ///
    /// Returns ``RunResult/finished`` at once, without notifying observers, if `mode` has no
    /// sources, timers or queued blocks (SPEC R10). Otherwise notifies ``Activity/entry``, makes
    /// passes (SPEC R19) until the end-of-pass decision returns a result (SPEC R14), and notifies
    /// ``Activity/exit``. A deadline at or before now makes exactly one pass that does not block
    /// (SPEC R12); `nil` means no deadline (SPEC R13). The deadline is checked at the end of each
    /// pass, so a long callout overruns it.
    ///
    /// May be called from inside any callout of this loop: a nested run, in the same or another
    /// mode (SPEC R18).
    ///
    /// - Parameters:
    ///   - mode: The mode to run. Must not be ``Mode/common`` (SPEC R9).
    ///   - deadline: When to return ``RunResult/timedOut``; `nil` for never.
    ///   - returnAfterSourceHandled: Return ``RunResult/handledSource`` after the pass in which a
    ///     source was performed (SPEC R14, R15, R47).
    /// - Returns: Why the call returned.
    /// - Important: Call on the loop's thread (SPEC R7).
    @discardableResult
    public func run(
        _ mode: Mode,
        until deadline: ContinuousClock.Instant? = nil,
        returnAfterSourceHandled: Bool = false
    ) -> RunResult {
        guard let deadline else {
            return runCall(
                mode, now: nil, deadline: LoopTime.distantFuture, zeroTimeout: false,
                returnAfterSourceHandled: returnAfterSourceHandled)
        }
        let nanoseconds = LoopTime.nanoseconds(of: deadline)
        let now = waiter.now()
        return runCall(
            mode, now: now, deadline: nanoseconds, zeroTimeout: nanoseconds <= now,
            returnAfterSourceHandled: returnAfterSourceHandled)
    }

    /// Runs the loop once in `mode` for at most `timeout` (SPEC R8, R12).
    ///
    /// A timeout ≤ 0 makes exactly one pass that does not block (SPEC R12). See
    /// ``run(_:until:returnAfterSourceHandled:)``.
    ///
    /// - Important: Call on the loop's thread (SPEC R7).
    @discardableResult
    public func run(
        _ mode: Mode,
        for timeout: Duration,
        returnAfterSourceHandled: Bool = false
    ) -> RunResult {
        let timeout = LoopTime.nanoseconds(of: timeout)
        let now = waiter.now()
        return runCall(
            mode, now: now, deadline: timeout <= 0 ? now : LoopTime.adding(timeout, to: now),
            zeroTimeout: timeout <= 0, returnAfterSourceHandled: returnAfterSourceHandled)
    }

    /// Runs the loop in the default mode until it is stopped or has nothing left to do.
    ///
    /// Repeats run calls in ``Mode/default`` until one returns ``RunResult/stopped`` or
    /// ``RunResult/finished`` (SPEC R8). Unlike Foundation's `RunLoop.run()`, it honours
    /// ``stop()`` (SPEC M1).
    ///
    /// - Important: Call on the loop's thread (SPEC R7).
    public func run() {
        while true {
            switch runCall(
                .default, now: nil, deadline: LoopTime.distantFuture, zeroTimeout: false,
                returnAfterSourceHandled: false)
            {
            case .stopped, .finished: return
            case .timedOut, .handledSource: continue
            }
        }
    }

    /// One run call. `now`: the clock read to compute the deadline, if any (the pass starts with it);
    /// `zeroTimeout`: the deadline is at or before now (SPEC R12).
    @inline(__always)
    func runCall(_ mode: Mode, now: Int64?, deadline: Int64, zeroTimeout: Bool, returnAfterSourceHandled: Bool)
        -> RunResult
    {
        preconditionOnLoopThread("run(_:)")
        if confined.hostedOutsideDispatch { Self.runWhileHosted(self) }
        guard
            let run = beginRunCall(
                mode, now: now, deadline: deadline, zeroTimeout: zeroTimeout,
                returnAfterSourceHandled: returnAfterSourceHandled)
        else { return .finished }
        // SPEC R16: a stop requested by an entry observer ends the run before the first pass.
        var result: RunResult? = consumeStopRequest(run) ? .stopped : nil
        while result == nil {
            let recordsPass = isInstrumented
            if recordsPass { instrumentPassBegan(run) }
            result = runPass(run)
            if recordsPass { instrumentPassEnded(run) }
            confined.timePassed()  // each pass reads the clock again, at most once
        }
        endRunCall(run)
        return result.unsafelyUnwrapped
    }

    /// The start of a run call, up to and including the entry observers (SPEC R10, R17, M4);
    /// `nil` if the mode is missing or empty (the call returns ``RunResult/finished`` at once).
    /// Shared by ``runCall(_:now:deadline:zeroTimeout:returnAfterSourceHandled:)`` and a hosted
    /// loop (``HostedLoop``).
    @inline(__always)
    func beginRunCall(_ mode: Mode, now: Int64?, deadline: Int64, zeroTimeout: Bool, returnAfterSourceHandled: Bool)
        -> RunContext?
    {
        confined.hasRun = true
        if isMain { installMainQueueSourceIfNeeded(runningIn: mode) }
        var dropped: [TimerHeap.Entry]?
        let entered: RunContext? = lock.withLock {
            // SPEC R10: a missing or empty mode returns at once, with no entry or exit.
            guard !state.lifecycle.isEnded, let modeState = state.existingMode(mode), !state.isEmpty(modeState)
            else {
                // Checked here, off the common path: `.common` never has a mode state of its own.
                precondition(mode != .common, Self.runningCommonMessage(self))
                dropped = state.timerGraveyard.takeIfAny()  // no pass will give them back
                return nil
            }
            if state.runCalls.isEmpty {
                // SPEC M4: a wake-up sent while the loop was not running is discarded. Done under
                // the lock, before the run call is visible, so that a wakeUp() that sees the run is
                // never erased. (A notification is cleared the same way; the usual state, awake,
                // costs no locked instruction.)
                state.wakeUpPending = false
                if sleepState.load(ordering: .relaxed) != Loop.awake {
                    sleepState.store(Loop.awake, ordering: .sequentiallyConsistent)
                }
            }
            return RunContext(
                mode: modeState, deadline: deadline, zeroTimeout: zeroTimeout,
                returnAfterSourceHandled: returnAfterSourceHandled, depth: state.pushRunCall(modeState),
                isRecorded: isInstrumented)
        }
        guard let run = entered else {
            if var dropped { releaseDropped(&dropped) }
            return nil
        }
        if let now { confined.setNow(now) } else { confined.timePassed() }
        if run.isRecorded { instrumentRunBegan(run) }
        notifyObservers(.entry, of: run)  // SPEC R17
        return run
    }

    /// The end of a run call: the exit observers (SPEC R17), then the call's record goes.
    @inline(__always)
    func endRunCall(_ run: RunContext) {
        notifyObservers(.exit, of: run)  // SPEC R17
        if run.isRecorded || isInstrumented { instrumentRunEnded(run) }
        dropStaleObserverSnapshots()  // an observer removed meanwhile is let go of by now
        // With the entries dropped since the last pass's timer step (by its callouts, say): the
        // loop may not run again for a long time.
        withLockReleasingDroppedTimers { state.popRunCall() }
    }

    /// One pass, exactly as SPEC R19 lists it. Returns the run's result, or `nil` for another pass.
    @inline(__always)
    private func runPass(_ run: RunContext) -> RunResult? {
        let head = passUntilWait(run)
        waitForWork(run, poll: head.poll)  // 8
        return passAfterWait(run, head)
    }

    /// What steps 1–7 of a pass decided, for the steps after the wait.
    struct PassHead {
        /// A source or an executor job was performed (steps 4–5).
        var handled: Bool
        /// The wait of step 8 must not block (step 6).
        var poll: Bool
    }

    /// Steps 1–7 of a pass (SPEC R19): up to the wait.
    @inline(__always)
    func passUntilWait(_ run: RunContext) -> PassHead {
        notifyObservers(.beforeTimers, of: run)  // 1
        notifyObservers(.beforeSources, of: run)  // 2
        runBlocks(run)  // 3
        var handled = performSignalledSources(run)  // 4, then executor jobs (SPEC N1)
        if !(handled && run.returnAfterSourceHandled) { handled = runExecutorJobs(run) || handled }
        if handled { runBlocks(run) }  // 5
        let poll = handled || run.zeroTimeout || hasBlocks(for: run.mode)  // 6
        if !poll { notifyObservers(.beforeWaiting, of: run) }  // 7
        return PassHead(handled: handled, poll: poll)
    }

    /// Steps 9–12 of a pass (SPEC R19): after the wait. Returns the run's result, or `nil` for
    /// another pass.
    @inline(__always)
    func passAfterWait(_ run: RunContext, _ head: PassHead) -> RunResult? {
        if !head.poll { notifyObservers(.afterWaiting, of: run) }  // 9
        fireDueTimers(run)  // 10: timers, then ready descriptor sources (SPEC M3)
        let handled = performReadyDescriptorSources(run) || head.handled
        runBlocks(run)  // 11
        return endOfPass(run, handled: handled)  // 12
    }

    /// Step 12, the end-of-pass decision in SPEC R14's precedence. The deadline is checked
    /// against the pass's clock, which every callout since the last reading made stale (the common
    /// empty pass reuses the reading taken after its wait).
    private func endOfPass(_ run: RunContext, handled: Bool) -> RunResult? {
        if handled && run.returnAfterSourceHandled { return .handledSource }
        if run.zeroTimeout { return .timedOut }
        if run.deadline != LoopTime.distantFuture && confined.now(waiter) >= run.deadline {
            return .timedOut
        }
        return lock.withLock {
            if state.takeStopRequest(at: run.depth) { return .stopped }
            return state.isEmpty(run.mode) ? .finished : nil
        }
    }

    /// Why running a hosted loop from its host traps.
    private static func runWhileHosted(_ loop: Loop) -> Never {
        preconditionFailure(
            "Loop.run(_:) was called on the \(loop) while a host runs it (see HostedLoop) and it waits in the host: two drivers cannot run one loop. From a callout of the loop (inside HostedLoop.dispatch()) a nested run is fine; from the host's own callbacks, hand the work to the loop with perform(inModes:_:) instead, or end the hosting first."
        )
    }

    /// Why running `.common` traps (SPEC R9, M5).
    private static func runningCommonMessage(_ loop: Loop) -> String {
        "Loop.run(_:) was asked to run .common on the \(loop): .common names the set of common modes and cannot be run (SPEC R9, M5). Run a concrete mode such as .default."
    }

    /// Takes this run call's stop request, if any (SPEC R66: the request is consumed).
    func consumeStopRequest(_ run: RunContext) -> Bool {
        guard state.mayHaveStopRequest else { return false }  // no lock when nobody asked
        return lock.withLock { state.takeStopRequest(at: run.depth) }
    }

    /// Step 6's third condition: a queued block may run in this mode (SPEC M10).
    private func hasBlocks(for mode: ModeState) -> Bool {
        state.mayHaveBlocks && lock.withLock { state.hasBlocks(for: mode) }
    }
}
