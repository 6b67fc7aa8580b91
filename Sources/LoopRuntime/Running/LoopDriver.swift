/// Drives a loop the way a resident thread does: runs it until stopped, and leaves and re-enters
/// it in another mode when asked — the "immediate switch" of the run-loop literature, usable from
/// any thread (and, with the `LoopExecutor` module, from async code).
///
/// A ``LoopThread`` drives its loop with one. Use one directly when your own thread owns a loop:
///
/// ```swift
/// let driver = LoopDriver(loop: .current)
/// // elsewhere: driver.switchMode(to: "tracking") { print("now tracking") }
/// driver.run()            // returns after driver.stop()
/// ```
///
/// The driver keeps the mode it runs alive (a never-signalled source it adds to each mode it
/// enters), so an empty mode does not end the drive. A switch stops the current run call (the
/// innermost one, SPEC R66) and the driver re-enters in the new mode; items of the old mode freeze,
/// items of both keep running, common items follow (SPEC R34, R63).
///
/// - Important: Safe from any thread, except ``run()``, which must be called on the loop's thread.
public final class LoopDriver: Sendable {
    /// The driven loop.
    public let loop: Loop

    private struct State {
        var mode: Loop.Mode
        var stopRequested = false
        var isDriving = false
        /// The last drive ended and no new one started: a switch now can never be served.
        var driveEnded = false
        /// Callbacks waiting for the loop to enter a mode (`true`), or for the drive to end first
        /// (`false`).
        var entered: [(mode: Loop.Mode, callback: @Sendable (SwitchOutcome) -> Void)] = []
        var keptAlive: Set<Loop.Mode> = []
        /// The run depth of the driver's own run calls (nested runs are left alone).
        var depth = 0
    }

    private let state: Locked<State>
    private let keepAlive = LoopSource {}
    private let guardian: LoopObserver

    /// A driver for `loop`, starting in `mode`.
    ///
    /// - Important: Safe from any thread.
    public init(loop: Loop, mode: Loop.Mode = .default) {
        precondition(mode != .common, "LoopDriver: .common cannot be run (SPEC R9); pick a concrete mode.")
        self.loop = loop
        let state = Locked(State(mode: mode))
        self.state = state
        // Catches a switch or stop that arrived while no run call was in progress (a stop is then
        // forgotten, SPEC R66): at the next entry or wait of a driven mode, it stops the run.
        // Bookkeeping: the instruments do not record it as a callout.
        guardian = LoopObserver(
            activities: [.entry, .beforeWaiting], repeats: true, order: .max, label: nil, takesNoTime: false,
            isRecorded: false
        ) { _, _ in
            let (wanted, stop, depth, driving) = state.withLock {
                ($0.mode, $0.stopRequested, $0.depth, $0.isDriving)
            }
            // Only the driver's own run call, and only while it drives (not nested runs, not
            // runs of the loop made after the drive ended).
            guard driving, loop.runCallDepth == depth else { return }
            if stop || loop.currentMode != wanted { loop.stopRunCall(depth) }
        }
    }

    /// The mode the driver runs, or is about to run after a switch.
    ///
    /// - Important: Safe from any thread.
    public var mode: Loop.Mode { state.withLock { $0.mode } }

    /// True while ``run()`` is in progress.
    ///
    /// - Important: Safe from any thread.
    public var isDriving: Bool { state.withLock { $0.isDriving } }

    /// Runs the loop until ``stop()``: one run call after another, in ``mode``, re-entering in the
    /// new mode after each ``switchMode(to:entered:)``.
    ///
    /// - Important: Call on the loop's thread.
    public func run() {
        loop.preconditionOnLoopThread("LoopDriver.run()")
        beginDrive()
        defer { endDrive() }
        while let mode = nextRunMode() { loop.run(mode) }
    }

    /// The start of a drive, on the loop's thread: ``run()``, or a host's (``HostedLoop``).
    func beginDrive() {
        // A stop requested before `run()` even started counts: it returns at once.
        state.withLock {
            $0.isDriving = true
            $0.driveEnded = false
        }
        loop.registerDriver(self)
    }

    /// The mode of the drive's next run call, which the caller makes at once; `nil` once the
    /// drive is stopped.
    func nextRunMode() -> Loop.Mode? {
        let (mode, stop, mustKeepAlive) = state.withLock { state in
            (state.mode, state.stopRequested, state.keptAlive.insert(state.mode).inserted)
        }
        if stop { return nil }
        if mustKeepAlive {
            // Accepted while the loop drains too: a stop that arrives between the check above
            // and the run below is caught only by the guardian (a draining loop refuses users'
            // new items, and a refused guardian once left a shut-down LoopThread asleep).
            loop.add(keepAlive, forMode: mode, whileDraining: true)
            loop.add(guardian, forMode: mode, whileDraining: true)
        }
        // Report the entry from inside the new run: a block of that mode runs in its first pass.
        serveEntered(mode)
        state.withLock { $0.depth = loop.runCallDepth + 1 }
        return mode
    }

    /// The end of a drive: the waiting switches are released, and the driver's items leave the
    /// loop.
    func endDrive() {
        loop.unregisterDriver(self)
        // Nobody will enter a mode for the waiting switches any more: release them. And the
        // driver's items leave the loop, so that later runs of it behave as without a driver.
        let (abandoned, visited): ([@Sendable (SwitchOutcome) -> Void], Set<Loop.Mode>) = state.withLock {
            state in
            state.isDriving = false
            state.driveEnded = true
            state.stopRequested = false  // the driver can be run again
            let callbacks = state.entered.map(\.callback)
            state.entered.removeAll()
            defer { state.keptAlive.removeAll() }
            return (callbacks, state.keptAlive)
        }
        for mode in visited {
            loop.remove(keepAlive, forMode: mode)
            loop.remove(guardian, forMode: mode)
        }
        for callback in abandoned { callback(.driveEnded) }
    }

    /// Leaves the current mode and re-enters the loop in `mode`; `entered` is called on the loop's
    /// thread from the first pass in the new mode (soon, if the loop already runs it), or when the
    /// switch cannot happen any more: at once, on the calling thread, if the drive has already
    /// ended; when the drive ends first; or when a switch to another mode supersedes this one
    /// before the loop entered `mode`.
    ///
    /// - Important: Safe from any thread.
    public func switchMode(to mode: Loop.Mode, entered: (@Sendable () -> Void)? = nil) {
        if let entered {
            switchMode(to: mode, reporting: { _ in entered() })
        } else {
            switchMode(to: mode, reporting: nil)
        }
    }

    /// How a switch ended, for ``switchMode(to:reporting:)``.
    package enum SwitchOutcome: Sendable, Equatable {
        /// The loop entered the mode (its first pass there has started).
        case entered
        /// A switch to another mode came before the loop entered this one.
        case superseded
        /// The drive ended before the loop entered the mode.
        case driveEnded
    }

    /// ``switchMode(to:entered:)``, telling `completion` how the switch ended (entered, superseded,
    /// or the drive ended first). `completion` is called exactly once. Support for the
    /// `LoopExecutor` module's async switch.
    ///
    /// - Important: Safe from any thread.
    package func switchMode(to mode: Loop.Mode, reporting completion: (@Sendable (SwitchOutcome) -> Void)?) {
        precondition(mode != .common, "LoopDriver.switchMode(to:): .common cannot be run (SPEC R9).")
        let outcome: (changed: Bool, ended: Bool, superseded: [@Sendable (SwitchOutcome) -> Void]) = state.withLock {
            state in
            // A drive that has ended calls no callback any more: answer now, never leave it waiting.
            if state.driveEnded { return (false, true, []) }
            let changed = state.mode != mode
            // The switches still waiting for another mode will not see it entered now: the loop
            // goes to `mode` instead (it is entered again only after another switch back).
            var superseded: [@Sendable (SwitchOutcome) -> Void] = []
            if changed {
                superseded = state.entered.filter { $0.mode != mode }.map(\.callback)
                state.entered.removeAll { $0.mode != mode }
            }
            if let completion { state.entered.append((mode, completion)) }
            state.mode = mode
            return (changed, false, superseded)
        }
        for callback in outcome.superseded { callback(.superseded) }
        if outcome.ended {
            completion?(.driveEnded)
        } else if outcome.changed {
            stopOwnRun()
        } else if completion != nil {
            serveEntered(mode)  // already in that mode
        }
    }

    /// Queues a block of `mode` that calls the callbacks waiting for `mode`: it runs in the first
    /// pass of that mode.
    private func serveEntered(_ mode: Loop.Mode) {
        let queued = loop.perform(inModes: [mode], label: "LoopDriver: mode entered") { [self] in
            for callback in takeEntered(mode) { callback(.entered) }
        }
        // The loop has ended: nothing will ever enter `mode`, so the waiting switches hear it now.
        if !queued {
            for callback in takeEntered(mode) { callback(.driveEnded) }
        }
    }

    /// The callbacks waiting for `mode`, taken out so that each is called once.
    private func takeEntered(_ mode: Loop.Mode) -> [@Sendable (SwitchOutcome) -> Void] {
        state.withLock { state in
            let matching = state.entered.filter { $0.mode == mode }.map(\.callback)
            state.entered.removeAll { $0.mode == mode }
            return matching
        }
    }

    /// Ends ``run()`` after the current pass (or at once when it starts, if it has not yet).
    ///
    /// - Important: Safe from any thread.
    public func stop() {
        state.withLock { $0.stopRequested = true }
        stopOwnRun()
    }

    /// Stops the driver's own run call — not a nested run started inside it, which ends on its own
    /// terms; the driver's run ends when control comes back to it.
    private func stopOwnRun() {
        let (driving, depth) = state.withLock { ($0.isDriving, $0.depth) }
        if driving && depth > 0 { loop.stopRunCall(depth) }
    }
}

extension Loop {
    /// The number of run calls in progress (nested runs count). Safe from any thread.
    var runCallDepth: Int { lock.withLock { state.runCalls.count } }

    /// The driver running this loop, if any (see ``LoopDriver``).
    ///
    /// - Important: Safe from any thread.
    public var driver: LoopDriver? { lock.withLock { state.driver } }

    func registerDriver(_ driver: LoopDriver) {
        lock.withLock {
            precondition(
                state.driver == nil || state.driver === driver,
                confined.isHosted
                    ? "LoopDriver.run(): the \(self) is run by a host (HostedLoop): end the hosting before driving it yourself."
                    : "LoopDriver.run(): the \(self) is already driven by another LoopDriver.")
            state.driver = driver
        }
    }

    func unregisterDriver(_ driver: LoopDriver) {
        lock.withLock { if state.driver === driver { state.driver = nil } }
    }
}
