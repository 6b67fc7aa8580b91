/// A `ContinuousClock.Instant` kept as plain data, for the values the loop thread copies at high
/// rates (activity events, ticks).
///
/// `ContinuousClock.Instant` is not frozen, so a struct that stores one has a layout known only at
/// run time, and every copy of it goes through value witnesses (several per activity event: into
/// the ring, out of it, into the resumption). `Duration` is frozen; an offset from a fixed instant
/// keeps the value exact (an instant is a duration inside) and the struct loadable; and a count
/// of nanoseconds (what the loop's clock reads) is smaller still and needs no conversion.
struct StoredInstant: Sendable, Hashable {
    /// Nanoseconds since `ContinuousClock`'s origin: loop time, the resolution of every instant
    /// the loop produces (timer dates, its clock readings).
    private let nanoseconds: Int64

    /// An instant, to the nanosecond; instants beyond loop time's range (±292 years around the
    /// clock's origin) are clamped to its ends, as the loop clamps timer dates.
    init(_ instant: ContinuousClock.Instant) {
        let (seconds, attoseconds) = unsafeBitCast(instant, to: Duration.self).components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        let (total, overflow2) = scaled.addingReportingOverflow(attoseconds / 1_000_000_000)
        nanoseconds = overflow || overflow2 ? (seconds < 0 ? .min : .max) : total
    }

    /// A reading of a loop's clock (`Loop.notification`): no conversion at all.
    @inline(__always)
    init(nanoseconds: Int64) {
        self.nanoseconds = nanoseconds
    }

    var instant: ContinuousClock.Instant {
        unsafeBitCast(Duration.nanoseconds(nanoseconds), to: ContinuousClock.Instant.self)
    }
}
