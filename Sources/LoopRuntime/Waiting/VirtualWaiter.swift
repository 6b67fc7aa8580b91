import CLoopRuntimeShims
import Dispatch

/// The waiter of a loop on virtual time (the `LoopTesting` library's `TestLoop`), on a resident
/// thread of its own.
///
/// The loop runs for real — its own pass, modes, observers, executors — but its clock only moves
/// when the test says so. A blocking wait returns at once for a wake-up or a descriptor the test
/// made ready; for the armed deadline only if the test lets time move that far (``advance(to:)``),
/// and then the clock jumps to the deadline, so that each timer sees its own fire date as the
/// time. Otherwise the loop is *idle*: nothing to do at the current virtual time, no task on its
/// way back onto the loop (a resumed waiter holds the loop's seal until its job arrives), and the
/// clock moves to the advance's target. The wait then tells whoever waited for that idle moment,
/// and blocks (for real) until something changes.
///
/// While its loop is ending (its `LoopThread` shuts down), the clock follows the armed deadlines
/// by itself: the drain must not wait for a test that is gone.
final class VirtualWaiter: SimulatedDescriptorWaiter, Sendable {
    /// Someone waiting for the loop to be idle at the target (the clock reaches every waiter's
    /// target before the loop is idle: `target` is the latest of them).
    struct IdleWaiter {
        /// False until a wait has returned since the request (a pass has run).
        var passed: Bool
        let callback: @Sendable () -> Void
    }

    struct State {
        var now: Int64
        /// How far the clock may move by itself to reach armed deadlines: `now`, unless an advance
        /// is under way.
        var target: Int64
        var armed = LoopTime.distantFuture
        var wakePending = false
        var closed = false
        var idleWaiters: [IdleWaiter] = []
        var descriptors = SimulatedDescriptors()
        /// Bumped by every change that may end an idle wait; a stall is reported only for an
        /// idle stretch with no change.
        var changes: UInt64 = 0
        var stallReported = false
    }

    /// A lock the thread sanitizer sees (`Synchronization.Mutex`'s futex it does not).
    private let state: Locked<State>
    private let signal = DispatchSemaphore(value: 0)
    /// The loop this waiter serves; set once, before the loop first waits. Unretained (the loop
    /// owns its waiter): only the loop's own wait reads it, on the loop's thread, while the loop
    /// is running and so alive.
    private let loopReference = Locked<Unmanaged<Loop>?>(nil)
    /// How long an idle loop with a pending sleep may wait for the test before `onStall` is told.
    private let stallTimeout: Duration
    private let onStall: @Sendable (Stall) -> Void

    /// Why nothing but the test could make progress.
    struct Stall {
        let now: Int64
        /// A task waits in a sleep or tick sequence of the loop; the armed deadline.
        var timerDeadline: Int64?
        /// Jobs of an executor for these modes are queued while the loop sleeps in another one.
        var jobsWaiting: (modes: [Loop.Mode], sleeping: Loop.Mode)?
    }

    init(start: Int64, stallTimeout: Duration, onStall: @escaping @Sendable (Stall) -> Void) {
        state = Locked(State(now: start, target: start))
        self.stallTimeout = stallTimeout
        self.onStall = onStall
    }

    /// Attaches the loop (unretained: the loop owns its waiter).
    func attach(_ loop: Loop) {
        loopReference.withLock { $0 = Unmanaged.passUnretained(loop) }
        changed { _ in }
    }

    private func withLoop<R>(_ body: (Loop) -> R) -> R? {
        guard let loop = loopReference.withLock({ $0 }) else { return nil }
        return loop._withUnsafeGuaranteedRef(body)
    }

    private func changed(_ body: (inout State) -> Void) {
        state.withLock {
            body(&$0)
            $0.changes &+= 1
        }
        signal.signal()
    }

    // MARK: - The test's side

    /// Lets the clock move to `target` (never back) and calls `whenIdle` once the loop is idle
    /// there; with `afterAPass`, only after the loop has woken once more (a pass ran).
    func advance(to target: Int64, afterAPass: Bool = false, whenIdle: @escaping @Sendable () -> Void) {
        changed {
            $0.target = max($0.target, target)
            $0.idleWaiters.append(IdleWaiter(passed: !afterAPass, callback: whenIdle))
        }
    }

    var virtualNow: Int64 { state.withLock { $0.now } }

    /// Reports `descriptor` ready with `flags` (epoll flags) once, at the next wait that watches
    /// it (an edge: the test says when the descriptor is ready again).
    func makeReady(_ descriptor: Int32, flags: UInt32) {
        changed { $0.descriptors.ready[descriptor, default: 0] |= flags }
    }

    // MARK: - LoopWaiter

    func now() -> Int64 { state.withLock { $0.now } }

    /// Another thread re-arms a sleeping loop without waking it (SPEC R41, M7): the wait must look
    /// again, the new deadline may be within an advance's target.
    func arm(_ deadline: Int64) {
        changed { $0.armed = deadline }
    }

    func wake() {
        changed { $0.wakePending = true }
    }

    func close() {
        changed { $0.closed = true }
        let waiters = state.withLock { state in
            defer { state.idleWaiters.removeAll() }
            return state.idleWaiters
        }
        for waiter in waiters { waiter.callback() }
    }

    func wait(blocking: Bool, into events: inout WaitEvents) {
        guard blocking else {
            _ = state.withLock { $0.descriptors.collectReady(into: &events, consuming: true) }
            return
        }
        while true {
            let (ending, inFlight) = withLoop { (!$0.isOpen, $0.hasSealHolds) } ?? (false, false)
            enum Next {
                case done
                case block(idle: [IdleWaiter], changes: UInt64, mayStall: Bool)
            }
            let next: Next = state.withLock { state in
                if state.closed { return .done }
                if state.wakePending {
                    state.wakePending = false
                    return .done
                }
                if state.descriptors.collectReady(into: &events, consuming: true) { return .done }
                if state.armed != LoopTime.distantFuture && (ending || state.armed <= state.target) {
                    state.now = max(state.now, state.armed)
                    state.target = max(state.target, state.now)
                    events.deadlineExpired = true
                    return .done
                }
                if inFlight { return .block(idle: [], changes: state.changes, mayStall: false) }
                // Idle: nothing more can happen before the target.
                state.now = max(state.now, state.target)
                var idle: [IdleWaiter] = []
                state.idleWaiters.removeAll { waiter in
                    guard waiter.passed else { return false }
                    idle.append(waiter)
                    return true
                }
                return .block(idle: idle, changes: state.changes, mayStall: !ending && state.idleWaiters.isEmpty)
            }
            guard case .block(let idle, let changes, let mayStall) = next else { break }
            for waiter in idle { waiter.callback() }
            if !idle.isEmpty { continue }  // the callbacks may have changed what there is to do
            if mayStall {
                let nanoseconds = Int(clamping: LoopTime.nanoseconds(of: stallTimeout))
                if signal.wait(timeout: .now() + .nanoseconds(nanoseconds)) == .timedOut {
                    reportStallIfStill(changes)
                }
            } else {
                signal.wait()
            }
        }
        // A wait returned: whoever asked for a pass first may now be told at the next idle moment.
        state.withLock { state in
            for index in state.idleWaiters.indices { state.idleWaiters[index].passed = true }
        }
    }

    /// The loop stayed idle for the whole stall timeout, with no advance under way. If a task waits
    /// in a sleep or tick sequence of the loop with a timer armed, or an executor's jobs wait for a
    /// mode the loop is not in, nothing but the test can make progress, and the test is not
    /// advancing. Told once.
    private func reportStallIfStill(_ changes: UInt64) {
        let timerAwaited = withLoop { $0.timerAwaiters.load(ordering: .relaxed) > 0 } ?? false
        let jobsWaiting = withLoop { $0.jobsWaitingForAnotherMode } ?? nil
        let report: Stall? = state.withLock { state in
            guard state.changes == changes, !state.stallReported else { return nil }
            let deadline = timerAwaited && state.armed != LoopTime.distantFuture ? state.armed : nil
            guard deadline != nil || jobsWaiting != nil else { return nil }
            state.stallReported = true
            return Stall(now: state.now, timerDeadline: deadline, jobsWaiting: jobsWaiting)
        }
        if let report { onStall(report) }
    }

    // Descriptor registrations: modelled on epoll (SimulatedDescriptorWaiter); readiness the test
    // makes is reported once.

    func withDescriptors<R>(
        _ body: (inout SimulatedDescriptors) throws(LoopSystemError) -> R
    ) throws(LoopSystemError) -> R {
        try state.withLock { (state) throws(LoopSystemError) in try body(&state.descriptors) }
    }
}
