/// What one wait observed.
struct WaitEvents {
    /// The armed deadline passed (the timerfd expired).
    var deadlineExpired = false
    /// The wake-up descriptor was signalled (and has been reset).
    var woken = false
    /// Registered descriptors that are ready: their token and epoll flags.
    var ready: [(token: UInt64, flags: UInt32)] = []

    mutating func reset() {
        deadlineExpired = false
        woken = false
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
    /// from any thread (another thread moves a timer of a sleeping loop this way, SPEC R41, M7).
    func arm(_ deadline: Int64)

    /// Waits until a wake-up, the armed deadline, or (later) a ready descriptor; does not block
    /// when `blocking` is false. Loop thread only.
    func wait(blocking: Bool, into events: inout WaitEvents)

    /// Ends the current or next blocking wait. Safe from any thread; a no-op after ``close()``.
    func wake()

    /// Starts watching `descriptor` for `events` (epoll flags), reported with `token`.
    /// Safe from any thread.
    func register(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError)

    /// Changes the events watched for `descriptor` (0 pauses it). Safe from any thread.
    func modify(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError)

    /// Stops watching `descriptor`. Safe from any thread.
    func deregister(_ descriptor: Int32) throws(LoopSystemError)

    /// Releases the waiter's resources. Called once, by the loop, when it is torn down.
    func close()
}
