/// The virtual clock of a `LoopThread` made for tests: what the `LoopTesting` library's `TestLoop`
/// is built on. The interface may change with that library; use `TestLoop`.
///
/// - Important: Safe from any thread.
@_spi(LoopTesting)
public struct LoopVirtualTime: Sendable {
    let waiter: VirtualWaiter

    /// Starts a `LoopThread` whose loop runs on a virtual clock starting at `start`.
    ///
    /// What stalled a loop on virtual time (see ``startThread(name:start:stallTimeout:onStall:)``).
    public struct Stall: Sendable {
        /// The virtual time.
        public let now: ContinuousClock.Instant
        /// The armed deadline, if a task waits in a sleep or tick sequence of the loop.
        public let timerDeadline: ContinuousClock.Instant?
        /// The modes of an executor whose jobs are queued, and the mode the loop sleeps in, if
        /// they cannot run there.
        public let jobsWaiting: (modes: [Loop.Mode], sleeping: Loop.Mode)?
    }

    /// `onStall` is called (on the loop's thread, once) when the loop has been idle for
    /// `stallTimeout` of real time while no advance is under way, and either a task waits in one
    /// of its sleeps or tick sequences with a timer armed, or an executor's jobs wait for a mode
    /// the loop is not in.
    public static func startThread(
        name: String, start: ContinuousClock.Instant, stallTimeout: Duration,
        onStall: @escaping @Sendable (Stall) -> Void
    ) throws(LoopSystemError) -> (LoopThread, LoopVirtualTime) {
        let waiter = VirtualWaiter(start: LoopTime.nanoseconds(of: start), stallTimeout: stallTimeout) {
            onStall(
                Stall(
                    now: LoopTime.instant($0.now), timerDeadline: $0.timerDeadline.map(LoopTime.instant),
                    jobsWaiting: $0.jobsWaiting))
        }
        let thread = try LoopThread(name: name) { () throws(LoopSystemError) -> any LoopWaiter in waiter }
        waiter.attach(thread.loop)
        return (thread, LoopVirtualTime(waiter: waiter))
    }

    /// The virtual time.
    public var now: ContinuousClock.Instant { LoopTime.instant(waiter.virtualNow) }

    /// Lets the clock move forward to `target` — each due timer fires at its own deadline, in
    /// order — and calls `whenIdle` once the loop is idle at `target` (or the loop has ended). With
    /// `afterAPass`, the loop must have woken once more before that (call `Loop.wakeUp()`).
    public func advance(
        to target: ContinuousClock.Instant, afterAPass: Bool = false, whenIdle: @escaping @Sendable () -> Void
    ) {
        waiter.advance(to: LoopTime.nanoseconds(of: target), afterAPass: afterAPass, whenIdle: whenIdle)
    }

    /// Reports `descriptor` ready for `events` once, at the loop's next wait that watches it.
    public func makeReady(_ descriptor: Int32, events: LoopDescriptorSource.Events) {
        waiter.makeReady(descriptor, flags: events.epollFlags)
    }
}
