import CLoopRuntimeShims
import Synchronization

/// A waiter with a virtual clock, for deterministic tests of the pass.
///
/// A blocking wait never sleeps. It first calls `duringWait`, which plays "another thread acting
/// while the loop sleeps" (it may wake or stop the loop, move timers, advance time…). Then, if a
/// wake-up is pending it returns at once; otherwise it jumps the virtual clock to the armed
/// deadline. With neither it traps: a real loop would sleep forever there, and a test should say
/// what it expected instead.
final class ManualWaiter: SimulatedDescriptorWaiter, Sendable {
    struct State {
        var now: Int64
        var armed = LoopTime.distantFuture
        var wakePending = false
        var blockingWaits = 0
        var pollingWaits = 0
        var armCalls = 0
        var wakeCalls = 0
        var closed = false
        /// Watched descriptors and the readiness to report at the next wait (see `makeReady`).
        var descriptors = SimulatedDescriptors()
        var registered: [Int32: (events: UInt32, token: UInt64)] { descriptors.registered }
    }

    let state: Locked<State>
    /// Called on the loop thread at the start of every blocking wait, while the loop counts as
    /// sleeping.
    let duringWait = Locked<(@Sendable (ManualWaiter) -> Void)?>(nil)

    /// A waiter whose virtual clock starts at `start` (loop time).
    init(start: Int64 = 1_000_000_000_000) {
        state = Locked(State(now: start))
    }

    func now() -> Int64 { state.withLock { $0.now } }

    /// Moves the virtual clock forward.
    func advance(by duration: Duration) {
        state.withLock { $0.now += LoopTime.nanoseconds(of: duration) }
    }

    func arm(_ deadline: Int64) {
        state.withLock {
            $0.armed = deadline
            $0.armCalls += 1
        }
    }

    /// Reports `descriptor` ready with `flags` (epoll flags) at the next wait, as long as it is
    /// registered for some of them.
    func makeReady(_ descriptor: Int32, flags: UInt32) {
        state.withLock { $0.descriptors.ready[descriptor, default: 0] |= flags }
    }

    /// Moves the readiness of watched, unpaused descriptors into `events` (like level-triggered
    /// epoll, readiness stays until cleared with `clearReady`). Returns true if any.
    private func collectReady(into events: inout WaitEvents) -> Bool {
        state.withLock { $0.descriptors.collectReady(into: &events, consuming: false) }
    }

    /// Stops reporting `descriptor` as ready (the test consumed its data).
    func clearReady(_ descriptor: Int32) {
        state.withLock { _ = $0.descriptors.ready.removeValue(forKey: descriptor) }
    }

    func withDescriptors<R>(
        _ body: (inout SimulatedDescriptors) throws(LoopSystemError) -> R
    ) throws(LoopSystemError) -> R {
        try state.withLock { (state) throws(LoopSystemError) in try body(&state.descriptors) }
    }

    func wait(blocking: Bool, into events: inout WaitEvents) {
        guard blocking else {
            state.withLock { $0.pollingWaits += 1 }
            _ = collectReady(into: &events)
            return
        }
        state.withLock { $0.blockingWaits += 1 }
        if let hook = duringWait.withLock({ $0 }) {
            hook(self)
        }
        if collectReady(into: &events) { return }
        let outcome: (woken: Bool, expired: Bool) = state.withLock {
            if $0.wakePending {
                $0.wakePending = false
                return (true, false)
            }
            if $0.armed != LoopTime.distantFuture {
                $0.now = max($0.now, $0.armed)
                return (false, true)
            }
            return (false, false)
        }
        precondition(
            outcome.woken || outcome.expired,
            "ManualWaiter: the loop would sleep forever (no wake-up pending, no deadline armed)")
        events.deadlineExpired = outcome.expired
    }

    func wake() {
        state.withLock {
            $0.wakePending = true
            $0.wakeCalls += 1
        }
    }

    func close() {
        state.withLock { $0.closed = true }
        // The test's hook often captures the loop, which holds this waiter: let go of it with the
        // loop's teardown, after unlocking (it may hold the last reference to the test's objects).
        _ = duringWait.withLock { $0.take() }
    }
}
