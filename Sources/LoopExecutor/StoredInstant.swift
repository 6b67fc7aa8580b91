/// A `ContinuousClock.Instant` kept as plain data, for the values the loop thread copies at high
/// rates (activity events, ticks).
///
/// `ContinuousClock.Instant` is not frozen, so a struct that stores one has a layout known only at
/// run time, and every copy of it goes through value witnesses (several per activity event: into
/// the ring, out of it, into the resumption). `Duration` is frozen; an offset from a fixed instant
/// keeps the value exact (an instant is a duration inside) and the struct loadable.
struct StoredInstant: Sendable, Hashable {
    private static let reference = ContinuousClock.now
    private let sinceReference: Duration

    init(_ instant: ContinuousClock.Instant) {
        sinceReference = Self.reference.duration(to: instant)
    }

    var instant: ContinuousClock.Instant { Self.reference.advanced(by: sinceReference) }
}
