import LoopRuntime

extension Loop {
    /// Suspends the calling task for `duration`, on this loop's timers.
    ///
    /// The sleep stays in the caller's isolation (`isolation` defaults to it). An actor pinned to a
    /// loop gets back onto it even while that loop shuts down: the shutdown ends the sleep first and
    /// does not end the loop before the resumed task has arrived there.
    ///
    /// The wake-up is a one-shot `LoopTimer` in `modes`: it fires only while the loop runs one of
    /// them, never early, at the latest `tolerance` late (SPEC R34, R43). (`Task.sleep` uses a
    /// loop's timers only with the package's ExperimentalExecutorHooks trait, and only in a task
    /// that prefers a loop executor; this always does.) Cancelling the task removes the timer at
    /// once and throws `CancellationError`.
    ///
    /// - Parameters:
    ///   - duration: How long to sleep, from `Loop.now` on the loop's clock
    ///     (`ContinuousClock`, or a test loop's virtual time).
    ///   - tolerance: How late the wake-up may be, so the loop can coalesce wake-ups.
    ///   - modes: The modes in which the timer fires; defaults to `Loop.Mode.common`.
    ///   - isolation: The caller's isolation, which the task stays in (the default is right).
    /// - Throws: `CancellationError` if the task is (or gets) cancelled; ``LoopEndedError`` if the
    ///   loop stops accepting work first — its `LoopThread` begins shutting down (then the sleep
    ///   ends at once, before the thread's executors stop, so an actor pinned to the thread runs on)
    ///   or its thread exits — or already has.
    /// - Precondition: `tolerance` is not negative; and the task does not run on this loop's own
    ///   thread while the loop is not running (a task on Swift's cooperative pool sleeping on
    ///   `Loop.current`): nothing would ever run the loop, so the call traps with a message instead.
    /// - Important: Safe from any task.
    public func sleep(
        for duration: Duration, tolerance: Duration = .zero, inModes modes: [Mode] = [.common],
        isolation: isolated (any Actor)? = #isolation
    ) async throws {
        precondition(
            tolerance >= .zero,
            "Loop.sleep(for:tolerance:inModes:): the tolerance must not be negative, got \(tolerance) (on the \(self))."
        )
        try await sleep(until: now + duration, tolerance: tolerance, inModes: modes, isolation: isolation)
    }

    /// Suspends the calling task until `deadline`, on this loop's timers. See
    /// ``sleep(for:tolerance:inModes:isolation:)``.
    ///
    /// - Throws: `CancellationError` or ``LoopEndedError``.
    /// - Precondition: `tolerance` is not negative; and the task does not run on this loop's own
    ///   thread while the loop is not running (a task on Swift's cooperative pool sleeping on
    ///   `Loop.current`): nothing would ever run the loop, so the call traps with a message instead.
    /// - Important: Safe from any task.
    public func sleep(
        until deadline: ContinuousClock.Instant, tolerance: Duration = .zero, inModes modes: [Mode] = [.common],
        isolation: isolated (any Actor)? = #isolation
    ) async throws {
        precondition(!modes.isEmpty, "Loop.sleep: the mode list is empty, so the timer could never fire.")
        precondition(
            tolerance >= .zero,
            "Loop.sleep(until:tolerance:inModes:): the tolerance must not be negative, got \(tolerance) (on the \(self))."
        )
        preconditionSomeoneRunsTheLoop("Loop.sleep")
        try Task.checkCancellation()
        let wakeUp = Mailbox(
            on: self, buffer: SingleValue<Void>(), name: "Loop.sleep", noun: "sleep", loopEndIsFailure: true,
            waitsForATimer: true)
        let timer = LoopTimer(fireAt: deadline, tolerance: tolerance) { [weak wakeUp] _ in
            wakeUp?.finish(delivering: ())
        }
        // Invalidating removes the timer from the loop at once (a no-op after it fired).
        wakeUp.attach(start: { for mode in modes { add(timer, forMode: mode) } }, detach: timer.invalidate)
        let (woken, failure): (Void?, (any Error)?) = await wakeUp.receive(isolation: isolation)
        if woken == nil { throw failure ?? CancellationError() }
    }

    /// A clock whose `sleep(until:tolerance:)` uses this loop's timers in `modes`.
    ///
    /// - Important: Safe from any thread.
    public func clock(inModes modes: [Mode] = [.common]) -> LoopClock {
        LoopClock(loop: self, inModes: modes)
    }
}

/// A `Clock` that sleeps on a loop's timers: use it where an API takes a clock, so that its
/// sleeps are mode-aware loop timers with tolerance.
///
/// Instants and durations are `ContinuousClock`'s; `now` is the loop's (virtual on a test loop).
///
/// - Important: Safe from any thread.
public struct LoopClock: Clock, Sendable {
    /// The clock's instants: `ContinuousClock`'s.
    public typealias Instant = ContinuousClock.Instant

    /// The loop whose timers the clock sleeps on.
    public let loop: Loop
    /// The modes in which its sleeps' timers fire.
    public let modes: [Loop.Mode]

    /// A clock sleeping on `loop`'s timers in `modes`.
    ///
    /// - Important: Safe from any thread.
    public init(loop: Loop, inModes modes: [Loop.Mode] = [.common]) {
        self.loop = loop
        self.modes = modes
    }

    /// The loop's clock reading, `Loop.now`: `ContinuousClock.now`, or the virtual
    /// time of a test loop.
    public var now: Instant { loop.now }

    /// One nanosecond: the timerfd's resolution.
    public var minimumResolution: Duration { .nanoseconds(1) }

    /// Sleeps until `deadline` on the loop's timers (see `Loop.sleep(until:tolerance:inModes:)`).
    ///
    /// - Throws: `CancellationError` or ``LoopEndedError``.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try await loop.sleep(until: deadline, tolerance: tolerance ?? .zero, inModes: modes)
    }
}
