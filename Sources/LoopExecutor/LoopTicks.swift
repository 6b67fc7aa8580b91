@_spi(LoopExecutorSupport) import LoopRuntime

extension Loop {
    /// An async sequence of ticks of a repeating loop timer.
    ///
    /// The timer starts when iteration starts (first interval from then) and fires only while the
    /// loop runs one of `modes` (SPEC R34), within `tolerance` (SPEC R43). A slow consumer never gets
    /// a backlog: it gets the latest tick with ``LoopTick/missed`` counting the ticks it did not see —
    /// both those the consumer was too slow for and the fire points the loop itself skipped
    /// (SPEC R37). The sequence ends (`nil`) when the consuming task is cancelled — the timer is
    /// removed at once — or when the loop's thread ends.
    ///
    /// ```swift
    /// for await tick in loop.ticks(every: .milliseconds(16), tolerance: .milliseconds(2)) {
    ///     render(at: tick.date)
    ///     if tick.missed > 0 { log("dropped \(tick.missed) frames") }
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - interval: The period; must be greater than zero.
    ///   - tolerance: How late a tick may be; clamped to half the interval (SPEC R43). Must not be
    ///     negative.
    ///   - modes: The modes in which the timer fires; defaults to `Loop.Mode.common`.
    /// - Important: Safe from any thread. Iterate from one task at a time. The sequence also ends
    ///   when the loop stops accepting work — its `LoopThread` begins shutting down (before the
    ///   thread's executors stop, so an actor pinned to the thread runs on) or its thread exits.
    public func ticks(
        every interval: Duration, tolerance: Duration = .zero, modes: [Mode] = [.common]
    ) -> LoopTicks {
        precondition(interval > .zero, "Loop.ticks(every:): the interval must be positive, got \(interval).")
        precondition(
            tolerance >= .zero,
            "Loop.ticks(every:tolerance:modes:): the tolerance must not be negative, got \(tolerance) (on the \(self))."
        )
        precondition(!modes.isEmpty, "Loop.ticks(every:): the mode list is empty, so the timer could never fire.")
        return LoopTicks(loop: self, interval: interval, tolerance: tolerance, modes: modes)
    }
}

/// One tick of ``LoopTicks``.
///
/// - Important: A value type; safe from any thread.
public struct LoopTick: Sendable, Hashable {
    /// The fire point this tick stands for (the timer's scheduled date, not the moment it ran).
    public let date: ContinuousClock.Instant
    /// How many ticks before this one were not delivered: skipped by the loop (it was busy or in
    /// another mode) or superseded while the consumer was busy.
    public let missed: Int
}

/// The ticks of a repeating loop timer; see `Loop.ticks(every:tolerance:modes:)`.
///
/// - Important: Safe from any thread; each iterator belongs to one task.
public struct LoopTicks: AsyncSequence, Sendable {
    /// The element: a ``LoopTick``.
    public typealias Element = LoopTick

    let loop: Loop
    let interval: Duration
    let tolerance: Duration
    let modes: [Loop.Mode]

    /// Starts the timer and returns an iterator over its ticks.
    public func makeAsyncIterator() -> Iterator {
        Iterator(storage: TickStorage(self))
    }

    /// Iterates the ticks; ends when its task is cancelled or the loop's thread ends.
    public struct Iterator: AsyncIteratorProtocol {
        let storage: TickStorage

        /// The next tick, or `nil` once the sequence ended.
        public mutating func next() async -> LoopTick? {
            await storage.next(isolation: nil)
        }

        /// The next tick, or `nil` once the sequence ended; waits in the caller's isolation, so an
        /// actor pinned to the loop is resumed by a job of the loop itself (`for await` uses this).
        public mutating func next(isolation actor: isolated (any Actor)?) async -> LoopTick? {
            await storage.next(isolation: actor)
        }
    }
}

/// The state shared by a tick iterator and its timer's callout: at most one pending tick, at most
/// one waiting consumer.
final class TickStorage: Sendable {
    private struct State {
        var pending: LoopTick?
        var waiter: UnsafeContinuation<LoopTick?, Never>?
        /// The loop the waiter's task hops onto when resumed, and the seal hold taken on it for the
        /// resumption in flight (see Locked+Resume.swift).
        var waiterHopTarget: Loop?
        var held: Loop?
        var finished = false
        var teardownToken: UInt64?
    }

    private let state = Locked(State())
    private let timer: LoopTimer
    private let loop: Loop
    private let interval: Duration

    init(_ ticks: LoopTicks) {
        loop = ticks.loop
        interval = ticks.interval
        let box = WeakTickStorage()
        timer = LoopTimer(
            after: ticks.interval, interval: ticks.interval,
            tolerance: min(ticks.tolerance, ticks.interval / 2)
        ) { timer in
            box.storage?.fire(timer)
        }
        box.storage = self
        let token = ticks.loop.addEndHandler { box.storage?.finish() }
        state.withLock { $0.teardownToken = token }
        if token == nil {
            state.withLock { $0.finished = true }
        } else {
            for mode in ticks.modes { ticks.loop.add(timer, forMode: mode) }
        }
    }

    deinit {
        finish()
    }

    func next(isolation actor: isolated (any Actor)?) async -> LoopTick? {
        if Task.isCancelled {
            finish()
            return nil
        }
        let target = hopTarget(of: actor)
        // Taking the hold out also orders the resumer's work before ours (Locked+Resume.swift).
        defer { state.withLock { $0.held.take() }?.releaseSealHold() }
        return await withTaskCancellationHandler {
            // `isolation: actor` makes this closure capture the actor and so run isolated to it
            // (SE-0420). Without it the closure ran on the global pool, and its return hopped
            // back onto the actor: a job enqueued on a loop whose shutdown had already drained.
            await withUnsafeContinuation(isolation: actor) { continuation in
                let ready: LoopTick?? = state.withLock { state in
                    if let pending = state.pending {
                        state.pending = nil
                        return .some(pending)
                    }
                    if state.finished { return .some(nil) }
                    state.waiter = continuation
                    state.waiterHopTarget = target
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            finish()
        }
    }

    /// The timer fired (loop thread): hand the tick to a waiting consumer, or keep it (and count
    /// the one it replaces) for a slow one.
    private func fire(_ timer: LoopTimer) {
        guard let date = timer.fireDate else { return }
        // A late firing stands for every fire point that has passed since its date: the timer
        // skips them (SPEC R37), so they count as missed now.
        let skipped = max(0, Int(date.duration(to: .now) / interval))
        state.withLock { state in
            guard !state.finished else { return }
            let replaced = state.pending.map { $0.missed + 1 } ?? 0
            let tick = LoopTick(date: date, missed: skipped + replaced)
            if let waiter = state.waiter {
                state.waiter = nil
                state.held = state.waiterHopTarget.holdForResume()
                waiter.resume(returning: tick)  // inside the lock: see Locked+Resume.swift
                return
            }
            state.pending = tick
        }
    }

    /// Ends the sequence: removes the timer, releases a waiting consumer with `nil`.
    func finish() {
        let (waiter, token): (UnsafeContinuation<LoopTick?, Never>?, UInt64?) = state.withLock { state in
            guard !state.finished || state.waiter != nil else { return (nil, nil) }
            state.finished = true
            state.pending = nil
            if state.waiter != nil { state.held = state.waiterHopTarget.holdForResume() }
            defer {
                state.waiter = nil
                state.teardownToken = nil
            }
            return (state.waiter, state.teardownToken)
        }
        timer.invalidate()
        if let token { loop.removeEndHandler(token) }
        if let waiter { state.resume(waiter, returning: nil) }
    }
}

/// Lets the timer's callout reach its storage without keeping it alive.
private final class WeakTickStorage: @unchecked Sendable {
    // Written once in TickStorage.init before the timer is added to a loop; read after.
    weak var storage: TickStorage?
}
