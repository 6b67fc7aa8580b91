@_spi(LoopExecutorSupport) import LoopRuntime

extension Loop {
    /// Suspends the calling task for `duration`, on this loop's timers.
    ///
    /// The sleep stays in the caller's isolation (`isolation` defaults to it). An actor pinned to a
    /// loop gets back onto it even while that loop shuts down: the shutdown ends the sleep first and
    /// does not end the loop before the resumed task has arrived there.
    ///
    /// The wake-up is a one-shot ``LoopTimer`` in `modes`: it fires only while the loop runs one of
    /// them, never early, at the latest `tolerance` late (SPEC R34, R43). (`Task.sleep` does not use
    /// a custom executor's timers in Swift 6.3; this does.) Cancelling the task removes the timer at
    /// once and throws `CancellationError`.
    ///
    /// - Parameters:
    ///   - duration: How long to sleep, on `ContinuousClock`.
    ///   - tolerance: How late the wake-up may be, so the loop can coalesce wake-ups.
    ///   - modes: The modes in which the timer fires; defaults to `Loop.Mode.common`.
    /// - Throws: `CancellationError` if the task is (or gets) cancelled; ``LoopEndedError`` if the
    ///   loop stops accepting work first — its `LoopThread` begins shutting down (then the sleep
    ///   ends at once, before the thread's executors stop, so an actor pinned to the thread runs on)
    ///   or its thread exits — or already has.
    /// - Precondition: `tolerance` is not negative.
    /// - Important: Safe from any task.
    public func sleep(
        for duration: Duration, tolerance: Duration = .zero, modes: [Mode] = [.common],
        isolation: isolated (any Actor)? = #isolation
    ) async throws {
        precondition(
            tolerance >= .zero,
            "Loop.sleep(for:tolerance:modes:): the tolerance must not be negative, got \(tolerance) (on the \(self)).")
        try await sleep(until: .now + duration, tolerance: tolerance, modes: modes, isolation: isolation)
    }

    /// Suspends the calling task until `deadline`, on this loop's timers. See
    /// ``sleep(for:tolerance:modes:)``.
    ///
    /// - Throws: `CancellationError` or ``LoopEndedError``.
    /// - Precondition: `tolerance` is not negative.
    /// - Important: Safe from any task.
    public func sleep(
        until deadline: ContinuousClock.Instant, tolerance: Duration = .zero, modes: [Mode] = [.common],
        isolation: isolated (any Actor)? = #isolation
    ) async throws {
        precondition(!modes.isEmpty, "Loop.sleep: the mode list is empty, so the timer could never fire.")
        precondition(
            tolerance >= .zero,
            "Loop.sleep(until:tolerance:modes:): the tolerance must not be negative, got \(tolerance) (on the \(self))."
        )
        try Task.checkCancellation()
        let sleeper = Sleeper(hopTarget: hopTarget(of: isolation))
        defer { sleeper.arrived() }
        try await withTaskCancellationHandler {
            // `isolation:` makes this closure capture the actor and so run isolated to it
            // (SE-0420): without it the closure would run on the global pool, and its return
            // would be one more hop onto the actor.
            try await withUnsafeThrowingContinuation(isolation: isolation) { continuation in
                sleeper.start(continuation, on: self, deadline: deadline, tolerance: tolerance, modes: modes)
            }
        } onCancel: {
            sleeper.finish(with: .failure(CancellationError()))
        }
    }

    /// A clock whose `sleep(until:tolerance:)` uses this loop's timers in `modes`.
    ///
    /// - Important: Safe from any thread.
    public func clock(modes: [Mode] = [.common]) -> LoopClock {
        LoopClock(loop: self, modes: modes)
    }
}

/// One sleep: a small state machine so that exactly one of fire, cancel and loop end resumes the
/// continuation, each removing what the others would have used.
private final class Sleeper: Sendable {
    private enum Phase {
        case idle
        case waiting(UnsafeContinuation<Void, any Error>, LoopTimer, Loop, UInt64)
        /// Finished — with the outcome, if it came before the sleep even started waiting.
        case done(Result<Void, any Error>?)
    }

    private struct State {
        var phase = Phase.idle
        /// The seal hold taken for the resumption, on the loop the task hops onto (see
        /// Locked+Resume.swift); released by the task once it is back.
        var held: Loop?
    }

    private let state = Locked(State())
    /// The loop the sleeping task hops onto when resumed (its isolation's, if pinned to a loop).
    private let hopTarget: Loop?

    init(hopTarget: Loop?) {
        self.hopTarget = hopTarget
    }

    func start(
        _ continuation: UnsafeContinuation<Void, any Error>, on loop: Loop,
        deadline: ContinuousClock.Instant, tolerance: Duration, modes: [Loop.Mode]
    ) {
        let timer = LoopTimer(fireAt: deadline, tolerance: tolerance) { [self] _ in
            finish(with: .success(()))
        }
        guard
            let token = loop.addEndHandler({ [self] in
                finish(with: .failure(LoopEndedError(loop: loop.description)))
            })
        else {
            return continuation.resume(throwing: LoopEndedError(loop: loop.description))
        }
        let early: Result<Void, any Error>?? = state.withLock { state in
            // Cancelled, or the loop ended, before the sleep started waiting.
            if case .done(let outcome) = state.phase { return .some(outcome) }
            state.phase = .waiting(continuation, timer, loop, token)
            return nil
        }
        if let early {
            loop.removeEndHandler(token)
            return continuation.resume(with: early ?? .failure(CancellationError()))
        }
        for mode in modes { loop.add(timer, forMode: mode) }
    }

    func finish(with result: Result<Void, any Error>) {
        let waiting: (UnsafeContinuation<Void, any Error>, LoopTimer, Loop, UInt64)? = state.withLock {
            state in
            switch state.phase {
            case .waiting(let continuation, let timer, let loop, let token):
                state.phase = .done(nil)
                state.held = hopTarget.holdForResume()
                return (continuation, timer, loop, token)
            case .idle:
                state.phase = .done(result)  // `start` resumes with it
                return nil
            case .done:
                return nil
            }
        }
        guard let (continuation, timer, loop, token) = waiting else { return }
        timer.invalidate()  // removes it from the loop at once (a no-op after it fired)
        loop.removeEndHandler(token)
        state.resume(continuation, with: result)
    }

    /// The task is back from its `await`: releases the seal hold taken for it, if any. Taking it
    /// out also orders the resumer's work before the task's (see Locked+Resume.swift).
    func arrived() {
        state.withLock { $0.held.take() }?.releaseSealHold()
    }
}

/// A `Clock` that sleeps on a loop's timers: use it where an API takes a clock, so that its
/// sleeps are mode-aware loop timers with tolerance.
///
/// Instants and durations are `ContinuousClock`'s.
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
    public init(loop: Loop, modes: [Loop.Mode] = [.common]) {
        self.loop = loop
        self.modes = modes
    }

    /// The current instant of `ContinuousClock`.
    public var now: Instant { .now }

    /// One nanosecond: the timerfd's resolution.
    public var minimumResolution: Duration { .nanoseconds(1) }

    /// Sleeps until `deadline` on the loop's timers (see `Loop.sleep(until:tolerance:modes:)`).
    ///
    /// - Throws: `CancellationError` or ``LoopEndedError``.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        try await loop.sleep(until: deadline, tolerance: tolerance ?? .zero, modes: modes)
    }
}
