import Synchronization

/// A timer that fires on a loop's thread at a date, once or repeatedly (SPEC E).
///
/// A timer belongs to the first loop it is added to, in any number of that loop's modes, sharing
/// one schedule (SPEC R33). It fires only while the loop runs one of its modes, never before its
/// fire date and, with a tolerance, at the latest at fire date + tolerance (SPEC R34, R43). A
/// repeating timer that misses fire points (the loop was busy or in another mode) fires once for
/// all of them and keeps its phase (SPEC R37). A one-shot timer is invalidated after it fires
/// (SPEC R36).
///
/// ```swift
/// let loop = Loop.current
/// let timer = LoopTimer(after: .milliseconds(100), interval: .milliseconds(100)) { _ in
///     print("tick")
/// }
/// loop.add(timer, forMode: .default)
/// loop.run(.default, for: .seconds(1))
/// ```
///
/// ## Many timers
///
/// A pending timer costs about 120 bytes besides its handler's captures (the object and its
/// place in each mode's deadline heap); adding one is O(log n) and a million of them are scheduled
/// and fired at over 3 million a second (BENCHMARKS.md). When a thousand or more timers are due in
/// one pass, the loop fires them in deadline order and lets go of its references to them after
/// the batch, in memory order — so a fired one-shot timer's handler and captures may be released
/// a little after its callout rather than right after it. The loop lets go of an invalidated or
/// removed timer within the call that invalidated or removed it, on that call's thread — so the
/// handler and its captures may be released there, as Foundation's `Timer.invalidate()` releases
/// its target. One exception, the price of O(1) invalidation: while a mode holds more pending
/// timers than invalidated ones, the place of an invalidated timer deep in the mode's deadline
/// heap is only marked stale, and the timer is let go of when that place comes up (its old fire
/// date, in a pass of the mode) or when stale places come to outnumber live ones. The memory of
/// timers let go of stays with the C allocator, ready for the next timers; after a teardown of a
/// million of them, ``Loop/returnFreeMemory()`` hands it back to the system (the library never
/// trims the allocator by itself).
///
/// - Important: Safe from any thread: you may create, add, move (``setFireDate(_:)``), change the
///   tolerance of, and invalidate a timer from any thread; a loop sleeping in one of the timer's
///   modes re-arms its wait without a wake-up (SPEC R40, R41). The handler runs on the loop's
///   thread.
public final class LoopTimer: @unchecked Sendable {
    // Thread-safety: `intervalNanoseconds`, `handler` and `hasLabel` are immutable (a label lives in
    // `binding`, whose box only labelled timers allocate). `binding` and `schedule` are guarded by the timer's stripe
    // lock; `valid` is an atomic that changes only under it. Once the timer is bound, `schedule`
    // is written only with the bound loop's lock held too (`Loop.reschedule`, a firing's end), so
    // that loop may read it under its own lock alone (`boundSchedule`). `modes`, `generation`,
    // `isFiring` and `sequence` are guarded by the lock of the loop the timer is bound to (only
    // that loop touches them, always holding its lock). Lock order: loop lock, then the stripe
    // lock. Each is a stored property of its own, so that writing one is never an access to
    // another (the thread sanitizer checks Swift accesses per variable).
    //
    // The stored properties are ordered to pack into 88 bytes: a pending timer's memory is part
    // of the timer budget (BENCHMARKS.md, "Timers"), and a 96-byte allocation is one malloc size
    // class below the 112/128-byte ones and freed without coalescing.

    let handler: @Sendable (LoopTimer) -> Void
    let intervalNanoseconds: Int64

    struct Schedule {
        var fireDate: Int64
        var tolerance: Int64

        /// A timer made with `init(after:)` and not added to a loop yet: `fireDate` is the delay
        /// and `tolerance` is complemented.
        var isDelay: Bool { tolerance < 0 }
    }
    /// Guarded by the stripe lock; written under the bound loop's lock too (see above).
    @exclusivity(unchecked) private var schedule: Schedule
    /// Guarded by the stripe lock.
    @exclusivity(unchecked) private var binding = LoopBinding()
    /// Changes only with the stripe lock held (sequentially consistent: the callout gate reads it
    /// without the lock, Loop+Callouts.swift); read under that lock, or alone by `isValid` and the
    /// gate.
    private let valid = Atomic<Bool>(true)

    /// Runs `body` with the timer's stripe lock held. Never nest two.
    @inline(__always)
    private func withStripeLock<R>(_ body: () -> R) -> R {
        LockStripes.lock(for: self).withLock(body)
    }

    /// Runs `body` on the schedule with the stripe lock held; `nil` for an invalid timer. For a
    /// bound timer, only with the bound loop's lock held (the access counts as a write).
    @inline(__always)
    func withValidSchedule<R>(_ body: (inout Schedule) -> R) -> R? {
        withStripeLock { valid.load(ordering: .relaxed) ? body(&schedule) : nil }
    }

    /// Marks the timer invalid (a one-shot after its callout, SPEC R36). Bound loop's lock held.
    func markInvalid() {
        withStripeLock { clearValidity() }
    }

    /// The schedule of a bound timer, read by its loop with only the loop's lock held (see the
    /// thread-safety note above).
    @inline(__always)
    var boundSchedule: Schedule { schedule }

    /// True while the handler runs; the timer then has no live heap entry (SPEC R42).
    @exclusivity(unchecked) var isFiring = false
    /// The timer has a label, kept in its binding's box (this byte is the layout's only spare one: a
    /// label stored here would take a pending timer past its 96-byte allocation). Lets an
    /// unlabelled timer answer `label` without its stripe lock.
    private let hasLabel: Bool
    /// Bumped whenever the schedule changes; heap entries of older generations are stale.
    @exclusivity(unchecked) var generation: UInt32 = 0
    /// The add order within the bound loop (ties between equal fire dates, SPEC R35).
    @exclusivity(unchecked) var sequence: UInt64 = 0
    /// The concrete modes of the bound loop the timer is in.
    @exclusivity(unchecked) var modes = ModeList()

    /// The interval of a repeating timer, to the nanosecond (loop time's resolution); `nil` for a
    /// one-shot timer.
    ///
    /// - Important: Safe from any thread (immutable).
    public var interval: Duration? {
        intervalNanoseconds > 0 ? .nanoseconds(intervalNanoseconds) : nil
    }

    /// Creates a timer that fires at `date`.
    ///
    /// - Parameters:
    ///   - date: The first fire date. A date in the past means "due now" (SPEC R32).
    ///   - interval: The period of a repeating timer, or `nil` for a one-shot timer. Must be
    ///     greater than zero.
    ///   - tolerance: How late the timer may fire, so the loop can coalesce wake-ups (SPEC R43).
    ///     Must not be negative; clamped to half the interval for repeating timers.
    ///   - label: The name of the timer's callouts in stall reports and traces (a static string).
    ///     Defaults to none.
    ///   - handler: Called on the loop's thread with the timer each time it fires.
    /// - Precondition: `interval` is `nil` or positive, `tolerance` is not negative (SPEC M5).
    public init(
        fireAt date: ContinuousClock.Instant,
        interval: Duration? = nil,
        tolerance: Duration = .zero,
        label: StaticString? = nil,
        _ handler: @escaping @Sendable (LoopTimer) -> Void
    ) {
        if let interval {
            precondition(
                interval > .zero,
                "LoopTimer: a repeating interval must be greater than zero, got \(interval). Pass interval: nil for a one-shot timer (SPEC M5)."
            )
        }
        // At least 1 ns: a positive interval below a nanosecond must still repeat.
        let intervalNanoseconds = interval.map { max(1, LoopTime.nanoseconds(of: $0)) } ?? 0
        self.intervalNanoseconds = intervalNanoseconds
        self.handler = handler
        let tolerance = Self.clampedTolerance(tolerance, interval: intervalNanoseconds)
        self.schedule = Schedule(fireDate: LoopTime.nanoseconds(of: date), tolerance: tolerance)
        self.hasLabel = label != nil
        if let label { binding = LoopBinding(label: label) }
    }

    /// The name of the timer's callouts in metrics, stall reports and traces, if it has one.
    ///
    /// - Important: Safe from any thread (immutable).
    public var label: StaticString? {
        hasLabel ? withStripeLock { binding.label } : nil
    }

    /// Creates a timer that first fires `delay` after it is added to a loop, on that loop's clock
    /// (``Loop/now``).
    ///
    /// The date is taken when the timer is first added to a loop, so a timer made here and added
    /// later still waits the whole `delay`, and on a loop with a virtual clock (the `LoopTesting`
    /// library's `TestLoop`) it fires when the test has advanced that loop's time by `delay`.
    /// Until it is added, ``fireDate`` reports `delay` from now on `ContinuousClock`, and
    /// ``setFireDate(_:)`` replaces the delay with an absolute date.
    ///
    /// - Parameters:
    ///   - delay: Time from the first add to the first fire date.
    ///   - interval: The period of a repeating timer, or `nil` for a one-shot timer.
    ///   - tolerance: How late the timer may fire (SPEC R43).
    ///   - label: The name of the timer's callouts in stall reports and traces. Defaults to none.
    ///   - handler: Called on the loop's thread with the timer each time it fires.
    public convenience init(
        after delay: Duration,
        interval: Duration? = nil,
        tolerance: Duration = .zero,
        label: StaticString? = nil,
        _ handler: @escaping @Sendable (LoopTimer) -> Void
    ) {
        self.init(fireAt: LoopTime.instant(0), interval: interval, tolerance: tolerance, label: label, handler)
        // Until bound, the fire date holds the delay, marked by a complemented (negative)
        // tolerance; `didBind(to:)` resolves it on the loop's clock.
        schedule = Schedule(fireDate: LoopTime.nanoseconds(of: delay), tolerance: ~schedule.tolerance)
    }

    /// True for a timer with an interval.
    public var isRepeating: Bool { intervalNanoseconds > 0 }

    /// False once the timer was invalidated, explicitly or after a one-shot fired.
    ///
    /// - Important: Safe from any thread.
    public var isValid: Bool { valid.load(ordering: .acquiring) }

    /// The next fire date, or `nil` for an invalid timer (SPEC R32).
    ///
    /// - Important: Safe from any thread.
    public var fireDate: ContinuousClock.Instant? {
        withStripeLock {  // reads only
            guard valid.load(ordering: .relaxed) else { return nil }
            guard schedule.isDelay else { return LoopTime.instant(schedule.fireDate) }
            return LoopTime.instant(LoopTime.adding(schedule.fireDate, to: LoopTime.now()))
        }
    }

    /// The tolerance in effect (after clamping for repeating timers, SPEC R43).
    ///
    /// Setting it repositions nothing but changes how late the loop may wake for this timer.
    ///
    /// - Important: Safe from any thread.
    /// - Precondition: not negative (SPEC M5).
    public var tolerance: Duration {
        get { .nanoseconds(withStripeLock { schedule.isDelay ? ~schedule.tolerance : schedule.tolerance }) }
        set {
            let clamped = Self.clampedTolerance(newValue, interval: intervalNanoseconds)
            update { $0.tolerance = $0.isDelay ? ~clamped : clamped }
        }
    }

    /// Moves the timer to fire at `date` (SPEC R40).
    ///
    /// The timer is repositioned in all its modes; a loop sleeping in one of them re-arms its
    /// wait for the new deadline, without a wake-up if it is later (SPEC R41, M7). Called from the
    /// timer's own handler, a later date replaces the repeat schedule (SPEC R38). No effect on an
    /// invalid timer.
    ///
    /// - Important: Safe from any thread.
    public func setFireDate(_ date: ContinuousClock.Instant) {
        let nanoseconds = LoopTime.nanoseconds(of: date)
        update {
            if $0.isDelay { $0.tolerance = ~$0.tolerance }  // an absolute date replaces the delay
            $0.fireDate = nanoseconds
        }
    }

    /// Stops the timer for good and removes it from every mode of its loop (SPEC R31-like,
    /// R39). Idempotent. A loop sleeping until this timer re-arms its wait (SPEC M7).
    ///
    /// When it returns, the handler is not running and will not run again — unless you call it on
    /// the loop's thread (from the handler itself or another callout: it returns at once), or while
    /// the handler runs a nested run of the loop. Called on another thread while the loop is in
    /// the middle of the handler, it waits for the handler to return; so the handler must not wait
    /// for the thread that invalidates it.
    ///
    /// - Important: Safe from any thread, including the timer's own handler.
    public func invalidate() { invalidateBoundItem() }

    /// Applies a change to the schedule, through the loop when the timer is bound to one so its
    /// heaps and armed deadline follow.
    private func update(_ change: (inout Schedule) -> Void) {
        let loop: Loop? = withStripeLock {
            guard valid.load(ordering: .relaxed) else { return nil }
            if !binding.isBound {
                change(&schedule)
                return nil
            }
            return binding.loop
        }
        loop?.reschedule(self, change)
    }

    static func clampedTolerance(_ tolerance: Duration, interval: Int64) -> Int64 {
        precondition(
            tolerance >= .zero,
            "LoopTimer: tolerance must not be negative, got \(tolerance) (SPEC M5).")
        let nanoseconds = LoopTime.nanoseconds(of: tolerance)
        return interval > 0 ? min(nanoseconds, interval / 2) : nanoseconds
    }
}

extension LoopTimer: LoopBoundCalloutItem {
    var isValidForCallout: Bool { valid.load(ordering: .sequentiallyConsistent) }
    func clearValidity() { valid.store(false, ordering: .sequentiallyConsistent) }
    func leaveModes(of loop: Loop) { loop.removeInvalidated(self) }
}

extension LoopTimer: LoopBoundItem {
    static var itemName: String { "LoopTimer" }
    static var bindingRule: String { "R33" }

    func withBinding<R>(_ body: (inout LoopBinding, _ isValid: Bool) -> R) -> R {
        withStripeLock { body(&binding, valid.load(ordering: .relaxed)) }
    }

    /// Resolves the delay of a timer made with `init(after:)` on its loop's clock. Stripe lock held.
    func didBind(to loop: Loop) {
        guard schedule.isDelay else { return }
        schedule = Schedule(
            fireDate: LoopTime.adding(schedule.fireDate, to: loop.waiter.now()), tolerance: ~schedule.tolerance)
    }
}
