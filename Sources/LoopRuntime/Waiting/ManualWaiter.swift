import CLoopRuntimeShims
import Synchronization

/// A waiter with a virtual clock, for deterministic tests of the pass.
///
/// A blocking wait never sleeps. It first calls `duringWait`, which plays "another thread acting
/// while the loop sleeps" (it may wake or stop the loop, move timers, advance time…). Then, if a
/// wake-up is pending it returns at once; otherwise it jumps the virtual clock to the armed
/// deadline. With neither it traps: a real loop would sleep forever there, and a test should say
/// what it expected instead.
final class ManualWaiter: LoopWaiter, Sendable {
    struct State {
        var now: Int64
        var armed = LoopTime.distantFuture
        var wakePending = false
        var blockingWaits = 0
        var pollingWaits = 0
        var armCalls = 0
        var wakeCalls = 0
        var closed = false
        /// Watched descriptors: events and token.
        var registered: [Int32: (events: UInt32, token: UInt64)] = [:]
        /// Readiness to report at the next wait (see `makeReady`).
        var ready: [Int32: UInt32] = [:]
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
        state.withLock { $0.ready[descriptor, default: 0] |= flags }
    }

    /// Moves the readiness of watched, unpaused descriptors into `events` (like level-triggered
    /// epoll, readiness stays until cleared with `clearReady`). Returns true if any.
    private func collectReady(into events: inout WaitEvents) -> Bool {
        state.withLock {
            var any = false
            for (descriptor, flags) in $0.ready {
                guard let registration = $0.registered[descriptor] else { continue }
                let reported = flags & (registration.events | CLOOP_EPOLLERR | CLOOP_EPOLLHUP)
                guard registration.events != 0, reported != 0 else { continue }
                events.ready.append((registration.token, reported))
                any = true
            }
            return any
        }
    }

    /// Stops reporting `descriptor` as ready (the test consumed its data).
    func clearReady(_ descriptor: Int32) {
        state.withLock { _ = $0.ready.removeValue(forKey: descriptor) }
    }

    func register(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        try state.withLock { (state) throws(LoopSystemError) in
            guard state.registered[descriptor] == nil else {
                throw LoopSystemError(call: "epoll_ctl", errno: EEXIST)
            }
            state.registered[descriptor] = (events, token)
        }
    }

    func deregister(_ descriptor: Int32, paused: Bool) throws(LoopSystemError) {
        guard !paused else { return }  // like epoll: pausing already took it out
        try state.withLock { (state) throws(LoopSystemError) in
            guard state.registered.removeValue(forKey: descriptor) != nil else {
                throw LoopSystemError(call: "epoll_ctl", errno: ENOENT)
            }
        }
    }
    // Modelled on epoll: pausing leaves the set, resuming adds back, checking modifies.
    func pause(_ descriptor: Int32) throws(LoopSystemError) {
        try deregister(descriptor, paused: false)
    }

    func resume(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        try register(descriptor, events: events, token: token)
    }

    func modify(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        try checkRegistration(descriptor, events: events, token: token)
    }

    func checkRegistration(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        try state.withLock { (state) throws(LoopSystemError) in
            guard state.registered[descriptor] != nil else {
                throw LoopSystemError(call: "epoll_ctl", errno: ENOENT)
            }
            state.registered[descriptor] = (events, token)
        }
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
    }
}
