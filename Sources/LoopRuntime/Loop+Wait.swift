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
            waiter.wake()
        }
    }

    /// A pass that does not block still ends "the next wait" a wake-up asked for (SPEC R68).
    @inline(__always)
    func consumeNotification() {
        _ = sleepState.compareExchange(
            expected: Loop.notified, desired: Loop.awake, ordering: .sequentiallyConsistent)
    }

    /// Step 8 of a pass: wait for work, a deadline, a ready descriptor or a wake-up — or, when
    /// polling, only look at the descriptors of the mode without blocking.
    func waitForWork(_ run: RunContext, poll: Bool) {
        // Taken out of the scratch (not copied), so that the buffer stays uniquely referenced and
        // resetting it keeps its capacity without allocating.
        var events = scratch.waitEvents
        scratch.waitEvents = WaitEvents()
        events.reset()
        defer { scratch.waitEvents = events }
        if poll {
            consumeNotification()
            pollDescriptors(run, into: &events)
            return
        }
        let now = waiter.now()
        // A notification that arrived while the loop was awake has done its job if its work is
        // recorded: the locked check below sees that work. Clearing it first means work already
        // consumed in this pass does not cost an empty pass later.
        consumeNotification()
        let mayBlock: Bool = lock.withLock {
            // SPEC M10: never sleep with work for this mode queued (it may have arrived during
            // the observers of step 7), nor with a wake-up or stop request pending (SPEC R67,
            // R68). Executor queues are told the loop is about to sleep in a mode they can run in
            // before they are checked (see LoopJobQueue).
            if state.wakeUpPending || state.runLevels[run.depth].stopRequested {
                state.wakeUpPending = false
                return false
            }
            if state.hasBlocks(for: run.mode) || state.hasSignalledSources(in: run.mode) {
                return false
            }
            let deadline = min(run.deadline, run.mode.timerHeap.wakeDeadline())
            if deadline <= now || announceSleep(in: run.mode) { return false }
            resumeWatching(in: run.mode)
            armLocked(deadline)
            state.sleepingMode = run.mode
            state.sleepingRunDeadline = run.deadline
            return true
        }
        guard mayBlock else {
            consumeNotification()
            pollDescriptors(run, into: &events)
            return
        }
        if sleepState.compareExchange(
            expected: Loop.awake, desired: Loop.sleeping, ordering: .sequentiallyConsistent
        ).exchanged {
            while true {
                waitingFlag.store(true, ordering: .releasing)
                waiter.wait(blocking: true, into: &events)
                waitingFlag.store(false, ordering: .releasing)
                let previous = sleepState.exchange(Loop.awake, ordering: .sequentiallyConsistent)
                let descriptorReady =
                    !events.ready.isEmpty
                    && lock.withLock { absorbReadiness(events.ready, in: run.mode) }
                events.ready.removeAll(keepingCapacity: true)
                if previous == Loop.notified || events.deadlineExpired || descriptorReady { break }
                // Only a stale eventfd write (SPEC M4), or descriptors of other modes (now
                // paused): sleep again, unless notified meanwhile.
                guard
                    sleepState.compareExchange(
                        expected: Loop.awake, desired: Loop.sleeping,
                        ordering: .sequentiallyConsistent
                    ).exchanged
                else {
                    sleepState.store(Loop.awake, ordering: .sequentiallyConsistent)
                    break
                }
            }
        } else {
            sleepState.store(Loop.awake, ordering: .sequentiallyConsistent)
        }
        lock.withLock {
            state.sleepingMode = nil
            state.wakeUpPending = false  // this wait has ended: a wake-up asked for no more
            if events.deadlineExpired { state.armedDeadline = LoopState.needsArming }
            for queue in state.jobQueues where queue.matches(run.mode) {
                queue.loopSleepsInMyMode.store(false, ordering: .sequentiallyConsistent)
            }
        }
    }

    /// Raises the sleep flag of every executor queue that can run in `mode`, then checks them for
    /// jobs; true if one has jobs (then the loop must not sleep). Lock held.
    private func announceSleep(in mode: ModeState) -> Bool {
        var hasJobs = false
        for queue in state.jobQueues where !queue.isRunning && queue.matches(mode) {
            queue.loopSleepsInMyMode.store(true, ordering: .sequentiallyConsistent)
            if queue.hasQueuedWork { hasJobs = true }
        }
        if hasJobs {
            for queue in state.jobQueues { queue.loopSleepsInMyMode.store(false, ordering: .relaxed) }
        }
        return hasJobs
    }

    /// A non-blocking look at the descriptors, so that descriptor sources are serviced in passes
    /// that do not wait (SPEC M3). Free when the mode has no descriptor source.
    private func pollDescriptors(_ run: RunContext, into events: inout WaitEvents) {
        let watched = lock.withLock { () -> Bool in
            guard run.mode.descriptorCount > 0 else { return false }
            resumeWatching(in: run.mode)
            return true
        }
        guard watched else { return }
        waiter.wait(blocking: false, into: &events)
        lock.withLock {
            _ = absorbReadiness(events.ready, in: run.mode)
            if events.deadlineExpired { state.armedDeadline = LoopState.needsArming }
        }
    }

    /// Arms the waiter for `deadline` unless it already is. Lock held.
    @inline(__always)
    func armLocked(_ deadline: Int64) {
        if state.armedDeadline != deadline {
            state.armedDeadline = deadline
            waiter.arm(deadline)
        }
    }

    /// After another thread removed items: true if the innermost running mode has nothing left that
    /// keeps it alive (observers do not count, SPEC R30). The loop's next (or current) wait then
    /// does not block, so that the run returns `finished` at once instead of sleeping until its
    /// deadline or forever (SPEC M7, R10, R14); the caller notifies it after unlocking. (A removal
    /// on the loop's own thread, from a callout, leaves the pass alone: emptiness is decided at the
    /// end of the pass, SPEC R14.) Lock held.
    func runningModeBecameEmpty() -> Bool {
        guard let running = state.innermostMode, running.hasNoSourcesOrTimers, !owner.isCurrent else {
            return false
        }
        state.wakeUpPending = true
        return true
    }

    /// After a timer of `modes` changed from outside the loop's thread: if the loop is blocked in
    /// one of those modes, re-arm its wait for the new earliest deadline (SPEC R41, M7). Lock held.
    func rearmIfSleeping<S: Sequence<ModeState>>(in modes: S) {
        guard let sleeping = state.sleepingMode, modes.contains(where: { $0 === sleeping }) else {
            return
        }
        armLocked(min(state.sleepingRunDeadline, sleeping.timerHeap.wakeDeadline()))
    }
}
