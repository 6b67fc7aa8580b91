import CLoopRuntimeShims
import Synchronization

// The wake-up protocol (SPEC M2, M4, R67, R68).
//
// `sleepState` is `awake` while the loop thread works, `sleeping` from just before it blocks until
// it wakes, and `notified` once another thread has handed it work since it last looked. A
// producer records its work under the loop's lock and then calls `notifyLoop()`, which swaps in
// `notified` and writes the eventfd only if the previous state was `sleeping`: at most one kernel
// wake per idle→busy transition, and none while the loop is awake. Before blocking, the loop
// re-checks its queues under the lock and then moves `awake → sleeping`; if that fails, someone
// notified it in between and it does not block. After waking it swaps back to `awake`. An eventfd
// write that lands after the notification it announced was consumed is recognized as stale (the
// state is still `sleeping`) and the loop goes back to sleep instead of making an empty pass.

extension Loop {
    static let awake: UInt8 = 0
    static let sleeping: UInt8 = 1
    static let notified: UInt8 = 2

    /// Tells the loop that work was handed to it. Call after recording the work.
    @inline(__always)
    func notifyLoop() {
        if sleepState.load(ordering: .sequentiallyConsistent) == Loop.notified { return }
        if sleepState.exchange(Loop.notified, ordering: .sequentiallyConsistent) == Loop.sleeping {
            // A clock read on the path that makes a system call anyway (see `handedOverAt`).
            if spinsBeforeWaiting { handedOverAt.store(waiter.now(), ordering: .relaxed) }
            waiter.wake()
        }
    }

    /// A pass that does not block still ends "the next wait" a wake-up asked for (SPEC R68).
    @inline(__always)
    func consumeNotification() {
        guard sleepState.load(ordering: .relaxed) == Loop.notified else { return }
        _ = sleepState.compareExchange(
            expected: Loop.notified, desired: Loop.awake, ordering: .sequentiallyConsistent)
    }

    /// Step 8 of a pass: wait for work, a deadline, a ready descriptor or a wake-up — or, when
    /// polling, only look at the descriptors of the mode without blocking. Three parts, as in
    /// libuv's `uv_run`: may the loop block, and until when (`enterSleep`); the wait and the
    /// sleep-state protocol (`sleep`); absorbing the wake (`leaveSleep`).
    @inline(__always)
    func waitForWork(_ run: RunContext, poll: Bool) {
        // A notification that arrived while the loop was awake has done its job if its work is
        // recorded: the locked check in `enterSleep` sees that work. Clearing it first means work
        // already consumed in this pass does not cost an empty pass later.
        consumeNotification()
        if poll {
            // The common polling pass: nothing more than this load without descriptor sources.
            if run.mode.mayHaveDescriptorSources { pollDescriptors(run) }
        } else {
            blockOrPoll(run)
        }
    }

    /// Step 8 when the pass may block.
    @inline(never)
    private func blockOrPoll(_ run: RunContext) {
        dropStaleObserverSnapshots()  // not kept through a long sleep
        // Nor are the stale timer entries the wait's deadline pruned. Their release may run user
        // code (a deinit), which may notify the loop: then `fallAsleep` keeps it awake.
        guard withLockReleasingDroppedTimers({ enterSleep(run) }) else {
            consumeNotification()
            if run.mode.mayHaveDescriptorSources { pollDescriptors(run) }
            return
        }
        let recordsWait = isInstrumented
        let waitStart = recordsWait ? instrumentWaitBegan() : 0
        var cause = MetricsStorage.WakeCause.handOff
        if spinsBeforeWaiting {
            // The reading `enterSleep` used: the moment the loop was ready to wait.
            let readyAt = confined.lastReading
            withWaitEvents { cause = sleep(run, spinningFrom: readyAt, into: &$0) }
            let end = waiter.now()
            // A hand-off that had to wake the loop was made at its stamp; the wake-up took the rest.
            confined.spin.waitEnded(
                from: readyAt, to: end, handedOverAt: handedOverAt.load(ordering: .relaxed),
                handOff: cause == .handOff)
        } else {
            withWaitEvents { cause = sleep(run, spinningFrom: nil, into: &$0) }
        }
        let wokenUp = lock.withLock { leaveSleep(run) }
        confined.timePassed()
        if recordsWait {
            if wokenUp {
                cause = .wakeUp
            } else if cause == .timer, run.deadline <= confined.now(waiter) {
                cause = .deadline
            }
            instrumentWaitEnded(since: waitStart, cause: cause)
        }
    }

    /// Lends the wait's result buffer, reset. It is taken out of the loop-thread state (not
    /// copied), so that it stays uniquely referenced and resetting it keeps its capacity.
    @inline(__always)
    private func withWaitEvents(_ body: (inout WaitEvents) -> Void) {
        var events = confined.waitEvents
        confined.waitEvents = WaitEvents()
        events.reset()
        body(&events)
        confined.waitEvents = events
    }

    /// May the loop block, and until when? `nil` if it must not: work for the mode is queued (it
    /// may have arrived during the observers of step 7), a wake-up or stop is pending (SPEC M10,
    /// R67, R68), or the deadline has come. Lock held; consumes a pending wake-up.
    private func blockingDeadline(_ run: RunContext, now: Int64) -> Int64? {
        if state.wakeUpPending || state.hasStopRequest(at: run.depth) {
            state.wakeUpPending = false
            return nil
        }
        if state.hasBlocks(for: run.mode) || state.hasSignalledSources(in: run.mode) { return nil }
        let deadline = min(run.deadline, run.mode.timerHeap.wakeDeadline())
        return deadline <= now ? nil : deadline
    }

    /// Decides to block and prepares for it: executor queues that can run in the mode are told the
    /// loop is about to sleep before they are checked (see LoopJobQueue), paused descriptor sources
    /// of the mode are watched again, the waiter is armed, and the sleeping mode is recorded so that
    /// other threads can re-arm the wait (SPEC R41, M7). Lock held; false if the loop must not block.
    private func enterSleep(_ run: RunContext) -> Bool {
        guard let deadline = blockingDeadline(run, now: confined.now(waiter)),
            !announceSleep(in: run.mode)
        else { return false }
        resumeWatching(in: run.mode)
        waiter.arm(deadline)
        state.sleepingMode = run.mode
        state.sleepingRunDeadline = run.deadline
        return true
    }

    /// The wait, with the sleep-state protocol: blocks until notified, the deadline, or a ready
    /// descriptor of the mode; a stale eventfd write (SPEC M4) or descriptors of other modes (now
    /// paused) send it back to sleep. Returns what ended it (a deadline counts as a timer's).
    /// A loop that spins (`readyAt` given) first watches its sleep state for the spin the policy
    /// allows: work handed over meanwhile is taken without a system call on either side.
    private func sleep(
        _ run: RunContext, spinningFrom readyAt: Int64?, into events: inout WaitEvents
    ) -> MetricsStorage.WakeCause {
        if let readyAt, confined.spin.budget > 0,
            spin(until: readyAt &+ confined.spin.budget)
        {
            _ = fallAsleep()  // fails (notified) and leaves the state awake
            // A loop kept busy by hand-offs may not block for a long while: its descriptors are
            // looked at now, as the blocking wait would have (SPEC M3).
            if run.mode.mayHaveDescriptorSources {
                waiter.wait(blocking: false, into: &events)
                if !events.ready.isEmpty { _ = lock.withLock { absorbReadiness(events.ready, in: run.mode) } }
                events.ready.removeAll(keepingCapacity: true)
            }
            return .handOff
        }
        while fallAsleep() {
            blockedInWait.store(true, ordering: .releasing)
            waiter.wait(blocking: true, into: &events)
            blockedInWait.store(false, ordering: .releasing)
            let previous = sleepState.exchange(Loop.awake, ordering: .sequentiallyConsistent)
            let descriptorReady =
                !events.ready.isEmpty && lock.withLock { absorbReadiness(events.ready, in: run.mode) }
            events.ready.removeAll(keepingCapacity: true)
            if previous == Loop.notified { return .handOff }
            if descriptorReady { return .descriptor }
            if events.deadlineExpired { return .timer }
        }
        return .handOff
    }

    /// Watches the sleep state until another thread notifies the loop (true), or loop time
    /// `limit` or the armed deadline comes (false; another thread that adds an earlier timer
    /// moves the armed deadline). The state stays `awake` meanwhile, so a producer that hands work
    /// over only swaps in `notified`: no eventfd write, and no wake-up for the loop to absorb.
    @inline(never)
    private func spin(until limit: Int64) -> Bool {
        var round = 0
        while sleepState.load(ordering: .relaxed) != Loop.notified {
            cloop_cpu_relax()
            round &+= 1
            if round & 15 == 0 {
                let now = waiter.now()
                if now >= limit || now >= waiter.armedDeadline() { return false }
            }
        }
        return true
    }

    // MARK: The wait of a hosted loop (HostedLoop.swift)

    /// Step 8 of a hosted pass, the half before the host's wait: decides to block and falls
    /// asleep as `blockOrPoll` does, but returns instead of blocking — the host waits, on
    /// ``HostedLoop/descriptor``. False if the loop must not block (then the descriptors were
    /// looked at, as in a pass that polls). No spin: the host owns the thread.
    func hostedEnterWait(_ run: RunContext) -> Bool {
        consumeNotification()  // as in `waitForWork`: work it announced is seen by the check
        dropStaleObserverSnapshots()
        guard withLockReleasingDroppedTimers({ enterSleep(run) }) else {
            consumeNotification()
            if run.mode.mayHaveDescriptorSources { pollDescriptors(run) }
            return false
        }
        guard fallAsleep() else {
            // Notified since the check: a hand-off, as in `sleep`; the wait ends before it began.
            _ = lock.withLock { leaveSleep(run) }
            return false
        }
        blockedInWait.store(true, ordering: .releasing)
        return true
    }

    /// The deadline the hosted loop's wait has now (loop time): the one armed, which another
    /// thread moves when it adds an earlier timer (SPEC R41); `nil` if it has passed.
    func hostedWaitDeadline() -> Int64? {
        let armed = waiter.armedDeadline()
        return armed == Int64.min || armed <= confined.now(waiter) ? nil : armed
    }

    /// Step 8 of a hosted pass, the half after the host's wait: looks at what woke the loop
    /// without blocking. Returns what ended the wait (a notification, a ready descriptor of the
    /// mode, the deadline; a hand-off when `force`d), or `nil` for a stale wake-up (SPEC M4) or
    /// one of another mode's descriptors, after which the loop is asleep again and the host goes
    /// on waiting.
    func hostedLeaveWait(_ run: RunContext, force: Bool) -> MetricsStorage.WakeCause? {
        var cause: MetricsStorage.WakeCause? = force ? .handOff : nil
        withWaitEvents { events in
            waiter.wait(blocking: false, into: &events)
            let previous = sleepState.exchange(Loop.awake, ordering: .sequentiallyConsistent)
            let descriptorReady =
                !events.ready.isEmpty && lock.withLock { absorbReadiness(events.ready, in: run.mode) }
            confined.timePassed()
            if previous == Loop.notified {
                cause = .handOff
            } else if descriptorReady {
                cause = .descriptor
            } else if events.deadlineExpired || hostedWaitDeadline() == nil {
                cause = .timer  // a hosted run has no deadline of its own
            }
        }
        // Stale: back to sleep, unless a notification came meanwhile.
        if cause == nil {
            if fallAsleep() { return nil }
            cause = .handOff
        }
        blockedInWait.store(false, ordering: .releasing)
        let wokenUp = lock.withLock { leaveSleep(run) }
        return wokenUp ? .wakeUp : cause
    }

    /// `awake → sleeping`; false if someone notified the loop since it last looked (then it stays
    /// awake and must not block).
    private func fallAsleep() -> Bool {
        let asleep = sleepState.compareExchange(
            expected: Loop.awake, desired: Loop.sleeping, ordering: .sequentiallyConsistent
        ).exchanged
        if !asleep { sleepState.store(Loop.awake, ordering: .sequentiallyConsistent) }
        return asleep
    }

    /// Absorbs the wake: the wait has ended, so a wake-up asks for no more, and the executor
    /// queues' sleep flags come down. Lock held. Returns whether a `wakeUp()` was pending.
    private func leaveSleep(_ run: RunContext) -> Bool {
        let wokenUp = state.wakeUpPending
        state.sleepingMode = nil
        state.wakeUpPending = false
        for queue in state.jobQueues where queue.matches(run.mode) {
            queue.loopSleepsInMyMode.store(false, ordering: .sequentiallyConsistent)
        }
        return wokenUp
    }

    /// Raises the sleep flag of every executor queue that can run in `mode`, then checks them for
    /// jobs; true if one has jobs (then the loop must not sleep). Lock held.
    private func announceSleep(in mode: ModeState) -> Bool {
        var hasJobs = false
        for queue in state.jobQueues where !queue.isRunningBatch && queue.matches(mode) {
            queue.loopSleepsInMyMode.store(true, ordering: .sequentiallyConsistent)
            if queue.hasQueuedWork { hasJobs = true }
        }
        if hasJobs {
            for queue in state.jobQueues { queue.loopSleepsInMyMode.store(false, ordering: .relaxed) }
        }
        return hasJobs
    }

    /// A non-blocking look at the descriptors, so that descriptor sources are serviced in passes
    /// that do not wait (SPEC M3). Called only when the mode may have descriptor sources: the
    /// others pay no lock and no system call.
    @inline(never)
    private func pollDescriptors(_ run: RunContext) {
        lock.withLock { resumeWatching(in: run.mode) }
        withWaitEvents { events in
            waiter.wait(blocking: false, into: &events)
            if !events.ready.isEmpty { lock.withLock { _ = absorbReadiness(events.ready, in: run.mode) } }
        }
    }
}
