import LoopRuntime

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
    /// - Precondition: The iteration does not start on this loop's own thread while the loop is not
    ///   running (nothing would run it; it traps with a message instead).
    /// - Important: Safe from any thread. Iterate from one task at a time (a second task waiting on
    ///   the same iterator traps). The sequence also ends when the loop stops accepting work — its `LoopThread` begins shutting down (before the
    ///   thread's executors stop, so an actor pinned to the thread runs on) or its thread exits.
    public func ticks(
        every interval: Duration, tolerance: Duration = .zero, inModes modes: [Mode] = [.common]
    ) -> LoopTicks {
        precondition(interval > .zero, "Loop.ticks(every:): the interval must be positive, got \(interval).")
        precondition(
            tolerance >= .zero,
            "Loop.ticks(every:tolerance:inModes:): the tolerance must not be negative, got \(tolerance) (on the \(self))."
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
    public var date: ContinuousClock.Instant { storedDate.instant }
    /// How many fire points were not delivered as ticks of their own: skipped by the loop (it was
    /// busy or in another mode) or superseded while the consumer was busy. A tick that fires late
    /// also counts the points that passed since its `date` (the timer skips them), so this is how
    /// many ticks you missed by the time this one arrives; each point is counted exactly once.
    public let missed: Int
    /// `date` as plain data (see `StoredInstant`).
    private let storedDate: StoredInstant

    init(date: ContinuousClock.Instant, missed: Int) {
        storedDate = StoredInstant(date)
        self.missed = missed
    }
}

/// The ticks of a repeating loop timer; see `Loop.ticks(every:tolerance:inModes:)`.
///
/// - Important: Safe from any thread; each iterator belongs to one task. Two tasks waiting in
///   `next()` on one iterator at once is a programmer error and traps (the second would otherwise
///   replace the first, which would wait for ever).
public struct LoopTicks: AsyncSequence, Sendable {
    /// The element: a ``LoopTick``.
    public typealias Element = LoopTick

    let loop: Loop
    let interval: Duration
    let tolerance: Duration
    let modes: [Loop.Mode]

    /// Starts the timer and returns an iterator over its ticks.
    public func makeAsyncIterator() -> Iterator {
        Iterator(MailboxHandle(startTimer()))
    }

    /// Iterates the ticks; see ``LoopEventIterator``.
    public typealias Iterator = LoopEventIterator<LoopTick>

    /// A mailbox fed by a new repeating timer in the sequence's modes.
    private func startTimer() -> Mailbox<LatestTick> {
        loop.preconditionSomeoneRunsTheLoop("LoopTicks")
        let mailbox = Mailbox(
            on: loop, buffer: LatestTick(), name: "LoopTicks", noun: "tick sequence", waitsForATimer: true)
        let interval = interval
        let counted = CountedFirePoints(loop: loop)
        let timer = LoopTimer(
            after: interval, interval: interval, tolerance: Swift.min(tolerance, interval / 2), label: "LoopTicks"
        ) { timer in
            guard let date = timer.fireDate else { return }
            mailbox.send(LoopTick(date: date, missed: counted.missed(firing: date, interval: interval)))
        }
        let (loop, modes) = (loop, modes)
        mailbox.attach(start: { for mode in modes { loop.add(timer, forMode: mode) } }, detach: timer.invalidate)
        return mailbox
    }
}

/// Counts the fire points of a tick timer that were never delivered, each exactly once.
///
/// A late firing reports at once every fire point that has passed since its date (the timer will
/// skip them after the callout, SPEC R37). The timer skips by a clock reading of its own, taken
/// after the callout, so it may skip one point more than the callout's reading saw: the next
/// firing's date shows it (the gap between dates), and it is counted then. Fire points stay on the
/// timer's grid (R37 keeps the phase), so the dates tell exactly what was skipped.
private final class CountedFirePoints: @unchecked Sendable {
    // Only the timer's callout touches it, and a timer's callouts run one at a time on its loop's
    // thread.
    /// The last fire point delivered or counted as missed.
    private var last: ContinuousClock.Instant?
    /// Whose clock says how many points have passed (immutable).
    private let loop: Loop

    init(loop: Loop) {
        self.loop = loop
    }

    func missed(firing date: ContinuousClock.Instant, interval: Duration) -> Int {
        let step = Self.nanoseconds(interval)
        // Skipped before this firing, beyond what was counted already.
        let skipped = last.map { Swift.max(0, Self.nanoseconds($0.duration(to: date)) / step - 1) } ?? 0
        // Passed since this firing's date: the timer skips them next.
        let passed = Swift.max(0, Self.nanoseconds(date.duration(to: loop.now)) / step)
        last = passed == 0 ? date : date + interval * passed
        return Int(skipped + passed)
    }

    /// Whole nanoseconds: integer arithmetic, exact where a `Double` quotient is not; clamped to
    /// `Int64` (an interval of `.seconds(Int64.max)` is "never", not an overflow).
    private static func nanoseconds(_ duration: Duration) -> Int64 {
        let attoseconds = Int128(duration._high) << 64 | Int128(duration._low)
        return Int64(clamping: attoseconds / 1_000_000_000)
    }
}

/// What a tick sequence keeps for a slow consumer: the latest tick, counting those it replaced.
struct LatestTick: MailboxBuffer {
    private var pending: LoopTick?

    mutating func append(_ tick: LoopTick) {
        let replaced = pending.map { $0.missed + 1 } ?? 0
        pending = LoopTick(date: tick.date, missed: tick.missed + replaced)
    }

    mutating func removeFirst() -> LoopTick? { pending.take() }
    mutating func removeAll() { pending = nil }
}
