/// The virtual clock of a `LoopThread` made for tests: what the `LoopTesting` library's `TestLoop`
/// is built on. The interface may change with that library; use `TestLoop`.
///
/// - Important: Safe from any thread.
@_spi(LoopTesting)
public struct LoopVirtualTime: Sendable {
    let waiter: VirtualWaiter

    /// Starts a `LoopThread` whose loop runs on a virtual clock starting at `start`.
    ///
    /// `onStall` is called (on the loop's thread, once) when the loop has been idle for
    /// `stallTimeout` of real time, with a timer armed and a task waiting in one of its sleeps or
    /// tick sequences, while no advance is under way: the virtual time now and the armed deadline.
    public static func startThread(
        name: String, start: ContinuousClock.Instant, stallTimeout: Duration,
        onStall: @escaping @Sendable (_ now: ContinuousClock.Instant, _ deadline: ContinuousClock.Instant) -> Void
    ) throws(LoopSystemError) -> (LoopThread, LoopVirtualTime) {
        let waiter = VirtualWaiter(start: LoopTime.nanoseconds(of: start), stallTimeout: stallTimeout) {
            onStall(LoopTime.instant($0), LoopTime.instant($1))
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

    /// Forgets readiness of `descriptor` not reported yet.
    public func clearReady(_ descriptor: Int32) {
        waiter.clearReady(descriptor)
    }
}
