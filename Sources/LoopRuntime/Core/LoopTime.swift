import CLoopRuntimeShims

/// Loop time: nanoseconds of `CLOCK_BOOTTIME`, the clock behind `ContinuousClock` on Linux.
///
/// The engine keeps every date as an `Int64` of this clock (cheap to compare, the key of the timer
/// heap, and what the timerfd is armed with) and converts at the public API, which speaks
/// `ContinuousClock.Instant` and `Duration`.
enum LoopTime {
    /// "No deadline": later than every real date.
    static let distantFuture = Int64.max

    /// The current time of the real clock.
    @inline(__always)
    static func now() -> Int64 { cloop_now_ns() }

    /// Converts an instant of `ContinuousClock` to loop time.
    ///
    /// `ContinuousClock.Instant` stores the clock's reading as a `Duration` since the clock's
    /// origin, and on Linux that reading is `clock_gettime(CLOCK_BOOTTIME)` — the same clock as
    /// ``now()``. A test (`LoopTimeTests`) checks the two stay interchangeable.
    @inline(__always)
    static func nanoseconds(of instant: ContinuousClock.Instant) -> Int64 {
        nanoseconds(of: unsafeBitCast(instant, to: Duration.self))
    }

    /// Converts loop time to an instant of `ContinuousClock`.
    @inline(__always)
    static func instant(_ nanoseconds: Int64) -> ContinuousClock.Instant {
        unsafeBitCast(Duration.nanoseconds(nanoseconds), to: ContinuousClock.Instant.self)
    }

    /// A duration in whole nanoseconds, clamped to the range of `Int64` (so `.seconds(.max)` means
    /// "practically never" instead of overflowing).
    @inline(__always)
    static func nanoseconds(of duration: Duration) -> Int64 {
        // Zero and anything under 2⁶⁴ attoseconds (18 s), without the out-of-line `==` and the
        // 128-bit division of `components`: `Duration` is frozen, its attoseconds in two halves.
        if duration._high == 0 { return Int64(duration._low / 1_000_000_000) }
        // The whole 128-bit count: `components` traps for more than `Int64.max` seconds, which a
        // far deadline (`.now + .seconds(.max)`) reaches.
        let attoseconds = Int128(duration._high) << 64 | Int128(duration._low)
        return Int64(clamping: attoseconds / 1_000_000_000)
    }

    /// `base + delta`, saturating instead of overflowing.
    @inline(__always)
    static func adding(_ delta: Int64, to base: Int64) -> Int64 {
        let (sum, overflow) = base.addingReportingOverflow(delta)
        return overflow ? (delta > 0 ? .max : .min) : sum
    }

    /// `later - earlier`, saturating instead of overflowing (a date clamped to `Int64.min`, from
    /// an instant of `.seconds(Int64.min)`, is "long ago", not a trap).
    @inline(__always)
    static func distance(from earlier: Int64, to later: Int64) -> Int64 {
        let (difference, overflow) = later.subtractingReportingOverflow(earlier)
        return overflow ? (later > earlier ? .max : .min) : difference
    }
}

extension ContinuousClock.Instant {
    /// This instant as loop time: nanoseconds of the clock behind `ContinuousClock`, for the
    /// package's own comparisons and atomics (an `Int64` fits in one).
    package var loopNanoseconds: Int64 { LoopTime.nanoseconds(of: self) }

    /// The instant of loop time `nanoseconds` (see ``loopNanoseconds``).
    package init(loopNanoseconds nanoseconds: Int64) { self = LoopTime.instant(nanoseconds) }
}
