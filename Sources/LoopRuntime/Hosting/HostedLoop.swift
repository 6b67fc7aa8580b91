/// A loop run by a host: another event loop that owns the thread (GLib's `GMainLoop`, a game
/// loop, a `poll(2)` loop of your own) and runs the loop's passes inside its own iterations.
///
/// Made by ``Loop/beginHosting(forMode:)`` on the loop's thread. The host repeats, on that thread:
///
/// 1. ``prepare()``, which says how long the host may wait for the loop's sake;
/// 2. its own wait — with ``descriptor`` among the descriptors it polls for reading — for at most
///    that long;
/// 3. ``dispatch()``, when the descriptor is readable or the time has come (calling it more often
///    is harmless: a dispatch with nothing to do returns at once).
///
/// until ``prepare()`` answers ``Wait/ended`` or the host is done with the loop, and then calls
/// ``end()``. The loop keeps every rule of a loop that runs itself: a dispatch performs the rest
/// of the current pass and the start of the next one, up to the point where the pass would wait,
/// so observers see each pass's activities in order, ``Loop/Activity/beforeWaiting`` when the
/// loop hands the thread back to the host and ``Loop/Activity/afterWaiting`` when the host gives
/// it back. Nothing polls on a timer: a loop with nothing to do keeps the host asleep until work,
/// a due timer or a ready descriptor of the running mode makes ``descriptor`` readable.
///
/// The hosted loop is run by a ``LoopDriver`` (``driver``, also ``Loop/driver``): a mode switch
/// (``LoopDriver/switchMode(to:entered:)``, or the async `switchMode` of `LoopExecutor`) leaves
/// the current run call and enters the new mode at the next dispatch; ``Loop/stop()`` ends the
/// current run call (its observers see ``Loop/Activity/exit``, then ``Loop/Activity/entry``
/// again); ``LoopDriver/stop()`` ends the hosting, and ``prepare()`` then answers
/// ``Wait/ended``. A callout may make a nested run of the loop (a modal run): it runs the loop
/// itself, and the host waits meanwhile. See <doc:HostingALoop> for the contract in full.
///
/// - Important: Every call must be made on the loop's thread (each traps elsewhere); the host,
///   not the loop, owns that thread's waits. `Sendable` so that the loop's own callouts (a block,
///   a timer) can end the hosting or read it.
public final class HostedLoop: @unchecked Sendable {
    // Thread-safety: `loop`, `driver` and `descriptor` are immutable; every other field is read
    // and written only on the loop's thread — each public member checks it runs there
    // (preconditionOnLoopThread) before touching them, and `deinit` runs on it or traps.
    /// The hosted loop.
    public let loop: Loop

    /// The driver that runs the loop's run calls: switch the hosted loop's mode with it, or stop
    /// it to end the hosting.
    public let driver: LoopDriver

    /// The descriptor the host polls for reading (`POLLIN`, `G_IO_IN`): readable whenever the
    /// loop has something to do — queued blocks or executor jobs, signalled sources, a due timer,
    /// a ready descriptor source of the running mode, a wake-up or a stop.
    ///
    /// The loop's own epoll descriptor: the host never reads it, closes it or adds it elsewhere;
    /// it stays open until the loop ends.
    public let descriptor: Int32

    /// How long the host may wait before the next ``dispatch()``, from ``prepare()``.
    public enum Wait: Sendable, Hashable {
        /// Call ``dispatch()`` without waiting: the current pass does not wait (work is queued,
        /// or a run call is to begin).
        case dispatchNow
        /// Wait until ``descriptor`` is readable, for at most until `deadline` (`nil`: no limit).
        ///
        /// The descriptor also becomes readable at the deadline (the loop's timer descriptor is
        /// part of it), so a host may wait on the descriptor alone; the deadline is for hosts
        /// that also keep their own timeout.
        case untilReadable(deadline: ContinuousClock.Instant?)
        /// The hosting has ended (its driver was stopped, or the loop ended): stop waiting on
        /// the descriptor and call ``end()``.
        case ended

        /// The wait as a `poll(2)` or GLib timeout in milliseconds, rounded up so that the host
        /// never wakes before the deadline: `0` for ``dispatchNow`` and ``ended``, `-1` for no
        /// limit.
        public var timeoutMilliseconds: Int32 {
            switch self {
            case .dispatchNow, .ended: return 0
            case .untilReadable(deadline: nil): return -1
            case .untilReadable(deadline: let deadline?):
                let left = ContinuousClock.now.duration(to: deadline)
                if left <= .zero { return 0 }
                let (seconds, attoseconds) = left.components
                let milliseconds = seconds * 1000 + (attoseconds + 999_999_999_999_999) / 1_000_000_000_000_000
                return Int32(clamping: milliseconds)
            }
        }
    }

    /// Where the hosted run is, between two calls of the host.
    private enum Phase {
        /// No run call of the hosting is in progress: the next dispatch begins one.
        case idle
        /// A run call is in progress, between two passes.
        case passStart
        /// Steps 1–7 of a pass are done and the pass does not wait: the next dispatch finishes it.
        case polling
        /// Steps 1–7 of a pass are done and the loop sleeps while the host waits; `since`: when
        /// the instruments saw the wait begin, if they record.
        case waiting(since: Int64?)
        /// The hosting is over.
        case ended
    }

    private var phase = Phase.idle
    /// The hosting's run call, while one is in progress.
    private var run: RunContext?
    /// What the first half of the current pass decided.
    private var head = Loop.PassHead(handled: false, poll: false)
    /// The instruments record the current pass.
    private var passIsRecorded = false
    /// A ``dispatch()`` (or the end) is in progress: the loop's callouts run inside it.
    private var isDispatching = false
    /// ``end()`` was called from inside a callout: the hosting ends when the dispatch returns.
    private var endRequested = false

    init(loop: Loop, mode: Loop.Mode, descriptor: Int32) {
        self.loop = loop
        self.descriptor = descriptor
        driver = LoopDriver(loop: loop, mode: mode)
        driver.beginDrive()
        loop.confined.isHosted = true
        loop.confined.hostedOutsideDispatch = true
    }

    deinit {
        if case .ended = phase { return }
        precondition(loop.isCurrentThread, Self.lostMessage(loop))
        end()
    }

    /// The hosting has ended: ``end()`` was called, its driver was stopped, or the loop ended.
    ///
    /// - Important: Call on the loop's thread.
    public var isEnded: Bool {
        loop.preconditionOnLoopThread("HostedLoop.isEnded")
        if case .ended = phase { return true }
        return false
    }

    /// How long the host may wait before it calls ``dispatch()``. Cheap: it runs no callout.
    ///
    /// - Important: Call on the loop's thread, from the host — not from inside a callout of the
    ///   loop (that traps).
    public func prepare() -> Wait {
        loop.preconditionOnLoopThread("HostedLoop.prepare()")
        precondition(!isDispatching, Self.reenteredMessage("prepare()", loop))
        switch phase {
        case .ended: return .ended
        case .idle, .passStart, .polling: return .dispatchNow
        case .waiting:
            // Read now, not when the wait began: another thread may have added an earlier timer.
            guard let deadline = loop.hostedWaitDeadline() else { return .dispatchNow }
            return .untilReadable(deadline: deadline == LoopTime.distantFuture ? nil : LoopTime.instant(deadline))
        }
    }

    /// Runs what is due, without blocking: the rest of the current pass (if the loop waited,
    /// from ``Loop/Activity/afterWaiting`` on) and the next pass up to its wait (through
    /// ``Loop/Activity/beforeWaiting``). Passes that do not wait — work keeps coming — follow
    /// one another, up to 16 in one call, before control goes back to the host (which then gets
    /// ``Wait/dispatchNow``). A wake-up that turns out stale, or a descriptor of a mode the loop
    /// does not run, leaves the loop waiting and runs nothing.
    ///
    /// - Important: Call on the loop's thread, from the host — not from inside a callout of the
    ///   loop (that traps: the loop is in the middle of a pass).
    public func dispatch() {
        loop.preconditionOnLoopThread("HostedLoop.dispatch()")
        precondition(!isDispatching, Self.reenteredMessage("dispatch()", loop))
        if case .ended = phase { return }
        isDispatching = true
        loop.confined.hostedOutsideDispatch = false
        defer {
            isDispatching = false
            if endRequested {
                finish()
            } else if !isEnded {
                loop.confined.hostedOutsideDispatch = true
            }
        }
        switch phase {
        case .waiting(let since):
            guard let cause = loop.hostedLeaveWait(run.unsafelyUnwrapped, force: false)
            else { return }  // stale: the loop sleeps on
            if let since { loop.instrumentWaitEnded(since: since, cause: cause) }
            finishPass()
        case .polling:
            loop.waitForWork(run.unsafelyUnwrapped, poll: true)  // 8, without blocking
            finishPass()
        case .idle, .passStart, .ended:
            break
        }
        // The next pass, up to its wait. Passes that do not wait follow one another here, up to
        // a bound: the host's poll for each would cost more than the pass (a poll per 16 is
        // noise), and the bound gives the thread back to the host's own sources soon enough.
        var passes = 0
        while !endRequested {
            startPass()
            guard case .polling = phase, passes < Self.passesPerDispatch else { break }
            passes += 1
            loop.waitForWork(run.unsafelyUnwrapped, poll: true)  // 8, without blocking
            finishPass()
        }
    }

    /// At most this many passes that do not wait are finished in one ``dispatch()``.
    static let passesPerDispatch = 16

    /// Ends the hosting: the loop leaves the host. If the loop waits, it wakes and finishes its
    /// pass as after a ``Loop/stop()``: due timers, ready descriptor sources and queued blocks
    /// run. The run call exits (``Loop/Activity/exit``), and the driver's items leave the loop.
    /// Nothing queued is dropped: what the finished pass did not get to — signalled sources,
    /// executor jobs, blocks its callouts queued — stays queued and runs at the loop's next run
    /// (by itself, by a ``LoopDriver``, or by a new hosting).
    ///
    /// Called from inside a callout of the loop, the hosting ends when the current
    /// ``dispatch()`` returns, after the current pass. Calling it again does nothing.
    ///
    /// - Returns: `true` if work for the hosted mode is still queued (it waits for the loop's
    ///   next run), `false` if nothing is.
    /// - Important: Call on the loop's thread.
    @discardableResult
    public func end() -> Bool {
        loop.preconditionOnLoopThread("HostedLoop.end()")
        let mode = driver.mode
        if isDispatching {
            endRequested = true
        } else if !isEnded {
            finish()
        }
        return loop.hasQueuedWork(in: mode)
    }

    // MARK: - The steps

    /// Begins a run call if none is in progress, then runs steps 1–7 of a pass and falls asleep
    /// if the pass waits; a pass that may not block after all is finished at once.
    private func startPass() {
        if case .idle = phase {
            guard let mode = driver.nextRunMode(),
                let run = loop.beginRunCall(
                    mode, now: nil, deadline: LoopTime.distantFuture, zeroTimeout: false,
                    returnAfterSourceHandled: false)
            else {
                // The driver was stopped, or the loop ended (its modes are gone).
                endHosting()
                return
            }
            self.run = run
            // SPEC R16: a stop requested by an entry observer ends the run before the first pass.
            if loop.consumeStopRequest(run) {
                endRun()
                return
            }
            phase = .passStart
        }
        let run = run.unsafelyUnwrapped
        passIsRecorded = loop.isInstrumented
        if passIsRecorded { loop.instrumentPassBegan(run) }
        head = loop.passUntilWait(run)
        if head.poll {
            phase = .polling
        } else if loop.hostedEnterWait(run) {
            phase = .waiting(since: loop.isInstrumented ? loop.instrumentWaitBegan() : nil)
        } else {
            finishPass()  // work came in step 7: the pass goes on without waiting
        }
    }

    /// Steps 9–12 of the current pass; ends the run call if the pass decided so.
    private func finishPass() {
        let run = run.unsafelyUnwrapped
        let result = loop.passAfterWait(run, head)
        if passIsRecorded { loop.instrumentPassEnded(run) }
        loop.confined.timePassed()
        if result == nil {
            phase = .passStart
        } else {
            endRun()
        }
    }

    private func endRun() {
        loop.endRunCall(run.unsafelyUnwrapped)
        run = nil
        phase = .idle
    }

    /// Ends the hosting from the host (``end()``, or a deferred end after a dispatch): the
    /// current pass is finished as a stopped one, the run call exits.
    private func finish() {
        isDispatching = true  // the pass's callouts run in here: no dispatch, no run from the host
        loop.confined.hostedOutsideDispatch = false
        defer { isDispatching = false }
        if let run {
            switch phase {
            case .waiting(let since):
                loop.stopRunCall(run.depth + 1)
                let cause = loop.hostedLeaveWait(run, force: true) ?? .handOff
                if let since { loop.instrumentWaitEnded(since: since, cause: cause) }
                finishPass()
            case .polling:
                loop.stopRunCall(run.depth + 1)
                loop.waitForWork(run, poll: true)
                finishPass()
            case .idle, .passStart, .ended:
                break
            }
        }
        if run != nil { endRun() }
        endHosting()
    }

    /// The driver lets go of the loop, and the thread's runs are the loop's own again.
    private func endHosting() {
        phase = .ended
        driver.endDrive()
        loop.confined.isHosted = false
        loop.confined.hostedOutsideDispatch = false
    }

    // MARK: - Messages

    private static func reenteredMessage(_ function: String, _ loop: Loop) -> String {
        "HostedLoop.\(function) was called from inside a callout of the \(loop), in the middle of a pass the host is running: the host must not re-enter the loop (GLib does not dispatch a source recursively unless asked to). Let the callout return, or hand the work to the loop with perform(inModes:_:)."
    }

    private static func lostMessage(_ loop: Loop) -> String {
        "A HostedLoop of the \(loop) was released on thread \(ThreadIdentity.currentDebugName) without end(): the hosting must be ended on the loop's thread, which the host owns."
    }
}

/// Why ``Loop/beginHosting(forMode:)`` refused to hand a loop to a host.
///
/// - Important: A value type; safe from any thread.
public enum LoopHostingError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The loop is already hosted: end that hosting (``HostedLoop/end()``) first.
    case alreadyHosted
    /// A run call of the loop is in progress: hosting begins outside any run, from the host.
    case running
    /// A ``LoopDriver`` drives the loop — a ``LoopThread``'s loop, which runs itself, or one that
    /// ``LoopDriver/run()`` or `Loop.runMain` drives.
    case driven
    /// The loop has no descriptor a host could wait on (a virtual-time test loop).
    case noDescriptor
    /// The loop has ended: nothing can run it any more.
    case ended

    /// What went wrong, in a sentence.
    public var description: String {
        switch self {
        case .alreadyHosted: "the loop is already hosted; end that hosting first"
        case .running: "a run call of the loop is in progress; begin hosting outside any run"
        case .driven: "a LoopDriver or LoopThread drives the loop; it runs itself"
        case .noDescriptor: "the loop has no descriptor to wait on (a virtual-time loop)"
        case .ended: "the loop has ended"
        }
    }
}

extension Loop {
    /// Hands this loop to a host — another event loop that owns the thread — which runs it in
    /// `mode` from now on (see ``HostedLoop``).
    ///
    /// ```swift
    /// let hosted = try Loop.current.beginHosting()
    /// while hostIsRunning {
    ///     let wait = hosted.prepare()
    ///     var fds = [pollfd(fd: hosted.descriptor, events: Int16(POLLIN), revents: 0)] + hostDescriptors
    ///     poll(&fds, nfds_t(fds.count), wait.timeoutMilliseconds)
    ///     hosted.dispatch()
    ///     // … the host's own work …
    /// }
    /// hosted.end()
    /// ```
    ///
    /// While hosted, the loop must not be run from the host's own code (that traps); its
    /// callouts may make nested runs. Hosting the main loop services `DispatchQueue.main` and
    /// so `@MainActor` jobs in its common modes, as ``run(_:until:returnAfterSourceHandled:)``
    /// does.
    ///
    /// - Parameter mode: The mode to run; switch it later with ``HostedLoop/driver``. Must not be
    ///   ``Mode/common``.
    /// - Throws: ``LoopHostingError`` if the loop is already hosted, running, driven by a
    ///   ``LoopDriver`` or ``LoopThread``, has no descriptor, or has ended.
    /// - Important: Call on the loop's thread (it traps elsewhere): the host runs the loop there.
    public func beginHosting(forMode mode: Mode = .default) throws(LoopHostingError) -> HostedLoop {
        preconditionOnLoopThread("beginHosting(forMode:)")
        precondition(
            mode != .common, "Loop.beginHosting(forMode:): .common cannot be run (SPEC R9); pick a concrete mode.")
        if confined.isHosted { throw .alreadyHosted }
        guard let descriptor = waiter.hostDescriptor else { throw .noDescriptor }
        let (running, driven, ended) = lock.withLock {
            (!state.runCalls.isEmpty, state.driver != nil, state.lifecycle.isEnded)
        }
        if ended { throw .ended }
        if driven { throw .driven }  // a LoopThread's loop is driven, and running, too
        if running { throw .running }
        return HostedLoop(loop: self, mode: mode, descriptor: descriptor)
    }

    /// Blocks, signalled sources or executor jobs wait for a run of `mode`.
    func hasQueuedWork(in mode: Mode) -> Bool {
        lock.withLock {
            guard let modeState = state.existingMode(mode) else { return false }
            return state.hasBlocks(for: modeState) || state.hasSignalledSources(in: modeState)
                || state.jobQueues.contains { $0.matches(modeState) && $0.hasQueuedWork }
        }
    }
}
