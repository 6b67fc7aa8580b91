import LoopRuntime

extension Loop {
    /// Runs `body` on the loop's thread `delay` from now, in one of `modes`, and returns its result
    /// to the awaiting task — or throws what it threw. Cancelling the task before the body has
    /// started withdraws it.
    ///
    /// The body runs in a one-shot `LoopTimer` in `modes` (`Loop.perform(after:inModes:label:_:)` with
    /// a result): at the first pass of one of those modes at or after the date, never early, at the
    /// latest `tolerance` late. The calling task is suspended meanwhile; no thread is blocked.
    /// SwiftNIO users know it as `EventLoop.scheduleTask(in:_:)`, whose `Scheduled.cancel()` is
    /// here the task's own cancellation:
    ///
    /// ```swift
    /// let reply = try await connection.loop.submit(after: .seconds(5)) {
    ///     connection.sendKeepAlive()
    /// }
    /// ```
    ///
    /// Exactly one of three things happens, and the answer says which:
    /// - the body runs, once, and its result (or error) is returned — a cancellation that comes
    ///   once it has started changes nothing;
    /// - the task is cancelled first: the timer is removed at once, the body never runs, and the
    ///   call throws `CancellationError`;
    /// - the loop stops accepting work first (its `LoopThread` begins shutting down, or its thread
    ///   exits): the body never runs, and the call throws ``LoopEndedError``.
    ///
    /// - Parameters:
    ///   - delay: How long to wait at least, on the loop's clock (a test loop's virtual time).
    ///   - tolerance: How late the body may start, so the loop can coalesce wake-ups; not negative.
    ///   - modes: The modes the timer fires in; must not be empty. Defaults to `Loop.Mode.common`.
    ///   - label: The name of the body's callout in stall reports and traces; defaults to
    ///     `"Loop.submit(after:)"`.
    ///   - isolation: The caller's isolation, which the task stays in (the default is right).
    ///   - body: The work, run once on the loop's thread.
    /// - Returns: What `body` returned.
    /// - Throws: What `body` threw; `CancellationError`; or ``LoopEndedError`` (see above).
    /// - Precondition: `modes` is not empty, `tolerance` is not negative, and the task does not
    ///   wait on a loop that nothing will run (`Loop.current` on a thread of Swift's cooperative
    ///   pool): it traps with a message instead of waiting for ever.
    /// - Important: Safe from any thread and any task.
    public func submit<Value: Sendable>(
        after delay: Duration,
        tolerance: Duration = .zero,
        inModes modes: [Mode] = [.common],
        label: StaticString? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: @escaping @Sendable () throws -> Value
    ) async throws -> Value {
        preconditionSomeMode(
            modes, in: "Loop.submit(after:tolerance:inModes:label:isolation:_:)", of: "the \(self)", queuing: "body")
        precondition(
            tolerance >= .zero,
            "Loop.submit(after:tolerance:inModes:label:isolation:_:): the tolerance must not be negative, got \(tolerance) (on the \(self))."
        )
        preconditionSomeoneRunsTheLoop("Loop.submit(after:)")
        try Task.checkCancellation()
        let submission = DelayedSubmission<Value>(on: self)
        let timer = LoopTimer(after: delay, tolerance: tolerance, label: label ?? "Loop.submit(after:)") { _ in
            submission.fire(body)
        }
        let result = await withTaskCancellationHandler {
            await submission.start(timer, modes: modes, isolation: isolation)
        } onCancel: {
            submission.end(with: CancellationError())
        }
        return try result.get()
    }
}

extension LoopThread {
    /// Runs `body` on the thread `delay` from now and returns its result:
    /// ``LoopRuntime/Loop/submit(after:tolerance:inModes:label:isolation:_:)`` of its loop. A
    /// shutdown that begins before the body has started withdraws it (``LoopEndedError``), as it
    /// cancels every delayed perform.
    ///
    /// - Throws: What `body` threw; `CancellationError` if the task was cancelled before the body
    ///   started; ``LoopEndedError`` if a shutdown began first.
    /// - Important: Safe from any thread and any task.
    public func submit<Value: Sendable>(
        after delay: Duration,
        tolerance: Duration = .zero,
        inModes modes: [Loop.Mode] = [.common],
        label: StaticString? = nil,
        isolation: isolated (any Actor)? = #isolation,
        _ body: @escaping @Sendable () throws -> Value
    ) async throws -> Value {
        try await loop.submit(
            after: delay, tolerance: tolerance, inModes: modes, label: label ?? "LoopThread.submit(after:)",
            isolation: isolation, body)
    }
}

/// One `submit(after:)`: a timer that runs the body, a cancellation and the loop's end racing for
/// the one answer. Whichever claims the phase first answers; the others do nothing.
private final class DelayedSubmission<Value: Sendable>: Sendable {
    private enum Phase {
        /// Made; the timer is not in the loop yet.
        case starting
        /// The timer is in the loop; `endHandler` is the loop-end registration to undo.
        case pending(LoopTimer, endHandler: UInt64)
        /// Answered (or about to be: the body runs).
        case claimed
    }

    private let loop: Loop
    private let phase = ExecutorLocked(Phase.starting)
    /// Where the answer goes: a one-value mailbox, not cancellable (the cancellation is one of the
    /// racers, through `end(with:)`).
    private let answer: Mailbox<SingleValue<Result<Value, any Error>>>

    init(on loop: Loop) {
        self.loop = loop
        answer = Mailbox(
            on: loop, buffer: SingleValue(), name: "Loop.submit(after:)", noun: "delayed submission",
            waitsForATimer: true)
    }

    /// Adds the timer (unless a cancellation came first) and waits for the answer.
    func start(
        _ timer: LoopTimer, modes: [Loop.Mode], isolation: isolated (any Actor)?
    ) async -> Result<Value, any Error> {
        // Registered first, so that an end between the check and the add is not missed. The
        // handler holds the submission until it runs or is removed; the timer's handler holds it
        // until the loop lets the timer go (after it fired, or was invalidated).
        if let token = loop.addEndHandler({ [self] in end(with: loop.endedError) }) {
            let added = phase.withLock { phase in
                guard case .starting = phase else { return false }
                phase = .pending(timer, endHandler: token)
                return true
            }
            if added {
                for mode in modes { loop.add(timer, forMode: mode) }
            } else {
                loop.removeEndHandler(token)  // cancelled in between: the answer is given
            }
        } else {
            end(with: loop.endedError)
        }
        let (result, _) = await answer.receive(isolation: isolation, cancellable: false)
        // The mailbox finishes only with an answer.
        return result ?? .failure(loop.endedError)
    }

    /// The timer fired: run the body, unless the submission was answered already. On the loop's
    /// thread.
    func fire(_ body: () throws -> Value) {
        guard case .pending(_, let token) = claim() else { return }
        loop.removeEndHandler(token)
        answer.finish(delivering: Result(catching: body))
    }

    /// A cancellation or the loop's end: withdraw the timer and answer `error`, unless the body
    /// has started (or an answer was given). Any thread.
    func end(with error: any Error) {
        switch claim() {
        case .pending(let timer, let token):
            timer.invalidate()
            loop.removeEndHandler(token)
        case .starting:
            break  // the timer was never added
        case .claimed:
            return
        }
        answer.finish(delivering: .failure(error))
    }

    /// Takes the phase, leaving it claimed: the caller that gets anything but `.claimed` answers.
    private func claim() -> Phase {
        phase.withLock { phase in
            defer { phase = .claimed }
            return phase
        }
    }
}
