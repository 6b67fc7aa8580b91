import Glibc

/// Whether a loop spins for a moment before it blocks, and for how long.
///
/// A loop that work reaches from other threads in quick succession — a task on the pool calling an
/// actor pinned to the loop again and again, several tasks contending for it — pays for every
/// gap between two jobs with a blocking wait: the producer's `eventfd` write, the kernel's
/// wake-up, the loop's `epoll_wait` returning. When the gaps are shorter than that round trip
/// through the kernel, watching the loop's sleep state for a few microseconds instead catches the
/// next job with neither system call (the producer sees a loop that is awake, SPEC R67).
///
/// The policy keeps the cost bounded and the idle rule whole:
/// - The loop spins only after a **gap shorter than ``limit``** that ended by a hand-off (work
///   from another thread), measured from the moment the loop was ready to wait, the spin
///   included, to the moment of the hand-off: a producer that finds the loop blocked stamps the
///   time before it writes the eventfd, so a slow wake-up through the kernel (tens of
///   microseconds on some virtual machines, more than the gap) does not count. Otherwise a loop
///   whose spin once missed would measure its own wake-ups from then on and never spin again.
///   A loop woken by its timers, its descriptors, or after a longer gap never spins.
/// - A spin lasts at most ``limit`` (and never past the wait's deadline). A spin that catches
///   nothing turns spinning off, and the blocking wait after it measures a gap longer than
///   ``limit``, so it stays off: a burst's end costs one spin of at most ``limit``, and an idle
///   loop none — it blocks at once, without a wake-up.
/// - Only a loop on the real clock spins (the manual and virtual waiters of tests do not), so
///   deterministic tests see the same passes as before.
///
/// Descriptor readiness is seen when the wait that follows the spin begins, so a spin delays it
/// by at most ``limit``; timers are not delayed (the spin ends at the deadline).
///
/// - Important: Loop thread only (it lives in the loop-thread state).
struct SpinPolicy {
    /// The longest spin, and the longest gap that turns spinning on: 20 µs, a few times the cost
    /// of a wake-up through the kernel on this class of machine, small next to a scheduler tick.
    static let limit: Int64 = 20_000

    /// Spinning is on unless the environment sets `LOOP_SPIN_BEFORE_WAIT=0` (read once).
    static let enabled: Bool = {
        guard let value = getenv("LOOP_SPIN_BEFORE_WAIT") else { return true }
        return String(cString: value) != "0"
    }()

    /// The spin the next wait may make, in nanoseconds (0: block at once).
    private(set) var budget: Int64 = 0

    /// A wait that was ready to begin at `start` ended at `end`, by a hand-off from another thread
    /// if `handOff`. `handedOverAt` is the last stamp a producer left when it woke the loop (see
    /// `Loop.handedOverAt`): inside the wait, it is when the hand-off was made, and the gap ends
    /// there; outside it (an older hand-off's stamp, or one not stored yet), the gap ends at `end`.
    /// A spin that catches a hand-off leaves no stamp, so an older one inside the wait can only
    /// make the gap shorter than it was: at worst one more spin of at most ``limit``.
    mutating func waitEnded(from start: Int64, to end: Int64, handedOverAt stamp: Int64 = 0, handOff: Bool) {
        let handedOver = stamp > start && stamp < end ? stamp : end
        budget = handOff && handedOver &- start < Self.limit ? Self.limit : 0
    }
}
