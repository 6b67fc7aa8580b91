import Synchronization

extension LoopWaiter {
    func armedDeadline() -> Int64 { .max }
    var hostDescriptor: Int32? { nil }
}

/// What one wait observed.
struct WaitEvents {
    /// The armed deadline passed (the timerfd expired).
    var deadlineExpired = false
    /// Registered descriptors that are ready: their token and epoll flags.
    var ready: [(token: UInt64, flags: UInt32)] = []

    mutating func reset() {
        deadlineExpired = false
        ready.removeAll(keepingCapacity: true)
    }
}

/// The wait primitive of a loop: the only place that blocks a loop thread.
///
/// The loop decides *when* and *how long* to wait and how wake-ups are coalesced (see
/// `Loop+Wait.swift`); a waiter only performs the wait. The production waiter is
/// ``EpollWaiter`` (epoll + eventfd + timerfd); tests drive the same pass with ``ManualWaiter``,
/// whose clock is virtual, so timer behaviour is tested deterministically.
protocol LoopWaiter: AnyObject, Sendable {
    /// The current loop time. Safe from any thread.
    func now() -> Int64

    /// Arms the wake-up deadline (absolute loop time); ``LoopTime/distantFuture`` disarms it.
    /// Arming also clears an expiration that was not consumed. Called with the loop's lock held,
    /// from any thread (another thread moves a timer of a sleeping loop this way, SPEC R41, M7),
    /// and before every blocking wait: arming the deadline already armed must cost no system call
    /// (see ``ArmedDeadline``).
    func arm(_ deadline: Int64)

    /// The deadline armed now (absolute loop time), `Int64.min` if it expired, `Int64.max` if the
    /// waiter does not say: a spinning loop stops at it, also when another thread moved it
    /// earlier while the loop spun. Safe from any thread.
    func armedDeadline() -> Int64

    /// Waits until a wake-up, the armed deadline, or (later) a ready descriptor; does not block
    /// when `blocking` is false. Loop thread only.
    func wait(blocking: Bool, into events: inout WaitEvents)

    /// A descriptor that is readable whenever a blocking ``wait(blocking:into:)`` would return:
    /// what a host polls for a hosted loop (HostedLoop.swift); `nil` if the waiter has none.
    var hostDescriptor: Int32? { get }

    /// Ends the current or next blocking wait. Safe from any thread; a no-op after ``close()``.
    func wake()

    /// Starts watching `descriptor` for `events` (epoll flags), reported with `token`.
    /// Safe from any thread.
    func register(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError)

    /// Stops watching `descriptor`, which `paused` says was paused (``pause(_:)``) or not. Safe
    /// from any thread.
    func deregister(_ descriptor: Int32, paused: Bool) throws(LoopSystemError)

    /// Stops reporting a registered `descriptor` for now: it is ready, but the loop runs a mode
    /// its source is not in, and must not wake for it again and again. Until ``resume(_:events:token:)``.
    /// Called with the loop's lock held.
    func pause(_ descriptor: Int32) throws(LoopSystemError)

    /// Reports a paused `descriptor` again, for `events` with `token`; throws `EBADF` if it was
    /// closed while paused. Called with the loop's lock held.
    func resume(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError)

    /// Changes what a registered, watched `descriptor` is reported for; a wait in progress sees the
    /// change (epoll re-checks the descriptor's readiness). Throws `EBADF`/`ENOENT` if it was closed
    /// while registered. Called with the loop's lock held.
    func modify(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError)

    /// Checks that `descriptor` is still the registered file (SPEC R53: a descriptor closed while
    /// registered can stay in the kernel's set through a duplicate and be reported ready for
    /// ever); throws `EBADF` or `ENOENT` if not. Costs a system call: the loop calls it rarely.
    func checkRegistration(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError)

    /// Releases the waiter's resources. Called once, by the loop, when it is torn down.
    func close()
}

/// The deadline a waiter's timer is armed with, so that arming it again is free: an idle loop that
/// blocks again and again for the same deadline makes no system call (SPEC M7), and takes no lock
/// that another thread's wake-up takes. Every backend keeps one (epoll's timerfd here; a kqueue
/// `EVFILT_TIMER` would the same way).
///
/// An atomic: `arm` is called with the loop's lock held (so two armings never race), the wait
/// records an expiration without it. A stale "armed" after an expiration only means the timer
/// stays expired until the next different deadline — the wait then returns at once, which is
/// what an expired deadline asks for.
final class ArmedDeadline: Sendable {
    /// Nothing armed that is known to be pending.
    private static let unknown = Int64.min
    private let armed = Atomic<Int64>(ArmedDeadline.unknown)

    /// True if the timer must be set for `deadline`.
    @inline(__always)
    func needsArming(for deadline: Int64) -> Bool {
        armed.load(ordering: .relaxed) != deadline
    }

    /// The deadline the timer is set for, or `Int64.min` after it expired.
    var current: Int64 { armed.load(ordering: .relaxed) }

    /// The timer was set for `deadline`.
    func didArm(_ deadline: Int64) {
        armed.store(deadline, ordering: .relaxed)
    }

    /// The timer expired: the next arming sets it whatever the date.
    func expired() {
        armed.store(ArmedDeadline.unknown, ordering: .relaxed)
    }
}
