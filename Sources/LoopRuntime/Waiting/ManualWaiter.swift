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
    }

    let state: Mutex<State>
    /// Called on the loop thread at the start of every blocking wait, while the loop counts as
    /// sleeping.
    let duringWait: Mutex<(@Sendable (ManualWaiter) -> Void)?> = Mutex(nil)

    /// A waiter whose virtual clock starts at `start` (loop time).
    init(start: Int64 = 1_000_000_000_000) {
        state = Mutex(State(now: start))
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

    func wait(blocking: Bool, into events: inout WaitEvents) {
        guard blocking else {
            state.withLock { $0.pollingWaits += 1 }
            return
        }
        state.withLock { $0.blockingWaits += 1 }
        if let hook = duringWait.withLock({ $0 }) {
            hook(self)
        }
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
        events.woken = outcome.woken
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
