import Dispatch
import LoopExecutor
@_spi(LoopTesting) import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// A loop on virtual time, for testing code that uses loops: timers, sleeps, tick sequences,
/// modes, observers and actors pinned to a loop, without waiting in real time.
///
/// A test loop is a real loop — the engine's own pass, modes, observers, executors and results —
/// on a resident thread of its own, like a `LoopThread`. Only its clock is virtual: it starts at
/// the moment the test loop is created and moves only when the test calls ``advance(by:isolation:)`` or
/// ``advance(to:isolation:)``. Between two advances the loop serves whatever is sent to it at the current
/// virtual time (blocks, executor jobs, pinned actors' calls) as a resident loop would.
///
/// ```swift
/// @Test func debounce() async throws {
///     let loop = try TestLoop()
///     let search = SearchBox(loop: loop.loop)         // a LoopActor pinned to the test loop
///     await search.type("sw")
///     try await loop.advance(by: .milliseconds(299))
///     #expect(await search.queries == [])
///     try await loop.advance(by: .milliseconds(1))    // the debounce timer fires now
///     #expect(await search.queries == ["sw"])
/// }
/// ```
///
/// **Time.** Code under test must read the time from the loop — `loop.now`, `LoopClock`, or the
/// relative forms `LoopTimer(after:)`, `perform(after:)`, `sleep(for:)`, `ticks(every:)` — not
/// from `ContinuousClock.now`, which keeps moving in real time. An advance fires every timer that
/// comes due on the way, in deadline order, each at its own fire date (a callout reading
/// `loop.now` sees that date); repeating timers skip missed points and tolerance is honoured, as on
/// a real loop. When ``advance(by:isolation:)`` returns, the loop is *idle* at the target time: everything
/// due by then has run, including the tasks those timers resumed on the loop.
///
/// **Determinism.** Work on the test loop's thread is deterministic, including a pinned actor that
/// consumes a tick sequence however it iterates (one tick per grid point, even in one long
/// advance). A task that is not isolated to the loop (the test's own task, a detached task), and a
/// pinned consumer while it awaits work elsewhere, run concurrently with the loop; the test
/// synchronizes with them by awaiting them (see the article *Testing code that uses loops*).
///
/// **A test that waits for a time it never reaches.** If the loop stays idle for
/// `stallTimeout` of real time while a task waits in one of its sleeps or tick sequences and no
/// advance is under way, nothing could ever wake that task: the test loop reports the stall on
/// standard error, keeps it in ``stall``, and shuts itself down, so the waiting task gets
/// `LoopEndedError` (and every later call of the test loop throws ``TestLoopError/stalled(_:)``)
/// instead of hanging.
///
/// - Important: Safe from any thread and task. Advance it from one task at a time.
public final class TestLoop: Sendable, CustomStringConvertible {
    /// The loop under test. Add items to it and pin actors to it (``executor``) from any thread.
    public let loop: Loop
    /// The resident thread that runs ``loop``: switch its mode with `loop.switchMode(to:)`, send it
    /// work with its `perform` methods.
    public let thread: LoopThread
    /// The test loop's name, as given.
    public let name: String
    private let time: LoopVirtualTime
    private let start: ContinuousClock.Instant
    private let stallState: StallState

    /// Shared with the stall callback, which must not keep the thread alive. (`Locked`: a lock the
    /// thread sanitizer sees.)
    private final class StallState: Sendable {
        let stall = Locked<TestLoopStall?>(nil)
        let thread = Locked<LoopThread?>(nil)  // cleared once the stall started the shutdown
    }

    /// Starts a test loop whose virtual clock reads `start` (now, by default).
    ///
    /// - Parameters:
    ///   - name: The thread's name, shown in messages.
    ///   - stallTimeout: How long (real time) the loop may sit idle while a task waits for one of
    ///     its timers, with no advance under way, before the test loop reports a stall and shuts
    ///     down. Real time, so keep it well above the time a busy machine may take between two
    ///     steps of a test (a parallel test run, a sanitizer build).
    /// - Throws: `LoopSystemError` if the thread cannot be started.
    public init(name: String = "TestLoop", stallTimeout: Duration = .seconds(30)) throws {
        let stallState = StallState()
        let start = ContinuousClock.now
        let (thread, time) = try LoopVirtualTime.startThread(name: name, start: start, stallTimeout: stallTimeout) {
            found in
            let stall = TestLoopStall(
                loop: "TestLoop '\(name)'", now: start.duration(to: found.now),
                timerDeadline: found.timerDeadline.map { start.duration(to: $0) },
                waitingJobModes: found.jobsWaiting?.modes, sleepingMode: found.jobsWaiting?.sleeping,
                stallTimeout: stallTimeout)
            stallState.stall.withLock { $0 = stall }
            var report = "\(stall)\n"
            report.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }  // standard error
            // Shut down off the loop's thread (shutting down waits for the thread to end).
            if let thread = stallState.thread.withLock({ $0.take() }) {
                DispatchQueue.global().async { thread.shutdown() }
            }
        }
        self.loop = thread.loop
        self.thread = thread
        self.name = name
        self.time = time
        self.start = start
        self.stallState = stallState
        stallState.thread.withLock { $0 = thread }
    }

    deinit {
        stallState.thread.withLock { $0 = nil }
    }

    /// The test loop's executor in the common modes (`loop.executor`): pin actors to it.
    public var executor: LoopExecutor { loop.executor }

    /// The virtual time: the loop's `now`.
    public var now: ContinuousClock.Instant { time.now }

    /// The virtual time elapsed since the test loop started.
    public var elapsed: Duration { start.duration(to: time.now) }

    /// The stall that shut the test loop down, if one did.
    public var stall: TestLoopStall? { stallState.stall.withLock { $0 } }

    /// A sentence for messages.
    public var description: String { "TestLoop '\(name)' at +\(elapsed)" }

    /// Moves virtual time forward by `duration` and returns once the loop is idle there: every
    /// timer due on the way has fired, each at its own date, and the work it caused on the loop
    /// has run.
    ///
    /// - Parameters:
    ///   - duration: How far to move; not negative.
    ///   - isolation: The caller's isolation, which the task stays in (the default is right).
    /// - Throws: ``TestLoopError`` if the test loop has ended (shut down, or after a stall).
    /// - Precondition: `duration` is not negative.
    public func advance(
        by duration: Duration, isolation: isolated (any Actor)? = #isolation
    ) async throws(TestLoopError) {
        precondition(
            duration >= .zero, "TestLoop.advance(by:): time only moves forward; got \(duration) on the \(self).")
        try await advance(to: now + duration, isolation: isolation)
    }

    /// Moves virtual time forward to `instant` (a time already passed leaves the clock where it is)
    /// and returns once the loop is idle there. See ``advance(by:isolation:)``.
    ///
    /// - Parameters:
    ///   - instant: The virtual time to move to.
    ///   - isolation: The caller's isolation, which the task stays in (the default is right).
    /// - Throws: ``TestLoopError`` if the test loop has ended.
    public func advance(
        to instant: ContinuousClock.Instant, isolation: isolated (any Actor)? = #isolation
    ) async throws(TestLoopError) {
        try checkOpen()
        await loop.waitOnce("TestLoop.advance", isolation: isolation, fallback: {}) { idle in
            time.advance(to: instant) { idle.complete(()) }
        }
        try checkOpen()
    }

    /// Runs what is runnable at the current virtual time — blocks, jobs, timers due — and returns
    /// once the loop is idle. Time does not move.
    ///
    /// - Parameter isolation: The caller's isolation, which the task stays in (the default is right).
    /// - Throws: ``TestLoopError`` if the test loop has ended.
    public func runUntilIdle(isolation: isolated (any Actor)? = #isolation) async throws(TestLoopError) {
        try await advance(to: now, isolation: isolation)
    }

    /// Wakes the loop for a pass at the current virtual time (observers see it: after waiting,
    /// before timers, before sources, before waiting) and returns once it is idle again.
    ///
    /// - Parameter isolation: The caller's isolation, which the task stays in (the default is right).
    /// - Throws: ``TestLoopError`` if the test loop has ended.
    public func runOnePass(isolation: isolated (any Actor)? = #isolation) async throws(TestLoopError) {
        try checkOpen()
        await loop.waitOnce("TestLoop.runOnePass", isolation: isolation, fallback: {}) { idle in
            time.advance(to: now, afterAPass: true) { idle.complete(()) }
            loop.wakeUp()
        }
        try checkOpen()
    }

    /// Makes `source`'s descriptor ready for `events`, reported once at the loop's next wait that
    /// watches it (the loop then calls the source's handler in a pass of one of its modes; a source
    /// paused in another mode gets it when its mode runs). Follow with ``runUntilIdle(isolation:)`` to let the handler
    /// run. The descriptor itself is not touched: a handler that reads it finds what the test wrote.
    ///
    /// - Important: Safe from any thread.
    public func makeReady(_ source: LoopDescriptorSource, for events: LoopDescriptorSource.Events = .readable) {
        time.makeReady(source.descriptor, events: events)
        loop.wakeUp()
    }

    /// Shuts the test loop down: accepted work runs, pending sleeps end with `LoopEndedError`, the
    /// thread ends (see `LoopThread.shutdown()`). Later calls throw ``TestLoopError/ended(loop:)``.
    /// Idempotent.
    public func shutdown() async {
        await thread.shutdown()
    }

    private func checkOpen() throws(TestLoopError) {
        if let stall { throw .stalled(stall) }
        if !loop.isOpen { throw .ended(loop: description) }
    }
}

/// Why a ``TestLoop`` call failed.
public enum TestLoopError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The test loop stopped after a stall: a task waited for a timer the test never advanced to.
    case stalled(TestLoopStall)
    /// The test loop was shut down.
    case ended(loop: String)

    /// A sentence for test failures.
    public var description: String {
        switch self {
        case .stalled(let stall): "\(stall)"
        case .ended(let loop): "\(loop) was shut down"
        }
    }
}

extension TestLoopError: LoopEndedErrorConvertible {
    /// ``ended(loop:)`` as a `LoopEndedError` (reason `shutDown`: a test loop ends when it is shut
    /// down); `nil` for a stall.
    public var loopEndedError: LoopEndedError? {
        switch self {
        case .stalled: nil
        case .ended(let loop): LoopEndedError(loop: loop, reason: .shutDown)
        }
    }
}

/// What a ``TestLoop`` saw when it stalled: idle, no advance under way, and something only the
/// test could unblock — a task waiting for one of its timers, or an actor's jobs waiting for a mode
/// the loop is not in.
public struct TestLoopStall: Sendable, Hashable, CustomStringConvertible {
    /// The test loop.
    public let loop: String
    /// Virtual time since the test loop started, when it stalled.
    public let now: Duration
    /// Virtual time since the test loop started of the timer deadline a task waited for, if one
    /// did (in a sleep or tick sequence of the loop).
    public let timerDeadline: Duration?
    /// The modes of an executor whose jobs were queued, if they could not run in the mode the loop
    /// ran (``sleepingMode``).
    public let waitingJobModes: [Loop.Mode]?
    /// The mode the loop was in, if jobs waited for another.
    public let sleepingMode: Loop.Mode?
    /// The real time the loop sat idle first.
    public let stallTimeout: Duration

    /// The report, with what to do about it.
    public var description: String {
        var causes: [String] = []
        if let timerDeadline {
            causes.append(
                "a task waits in a sleep or tick sequence of the loop whose timer is due at +\(timerDeadline); virtual time moves only when the test calls advance(by:) or advance(to:): advance it (from another task if the test itself is the one waiting), or do not await a timer the test has not reached"
            )
        }
        if let waitingJobModes, let sleepingMode {
            causes.append(
                "jobs of an executor for the modes \(waitingJobModes.map(\.rawValue)) are queued while the loop runs '\(sleepingMode.rawValue)', where they cannot run: switch the loop back (loop.switchMode(to:)), make the mode common (loop.addCommonMode(_:)), or do not await that actor during the switch"
            )
        }
        return
            "\(loop) stalled: idle at virtual time +\(now) for \(stallTimeout) of real time, while \(causes.joined(separator: "; and ")). The test loop was shut down, so waiting tasks get LoopEndedError (and queued jobs run in its drain) instead of hanging."
    }
}
