import CLoopRuntimeShims

extension Loop {
    /// Adds `timer` to `mode` (every common mode for ``Mode/common``, SPEC R63).
    ///
    /// The timer shares one schedule across all its modes; adding it again to a mode does nothing,
    /// and adding an invalid timer does nothing (SPEC R33). A loop sleeping in `mode` re-arms its
    /// wait for the timer without needing a wake-up (SPEC R41). A loop that is shutting down or has
    /// ended refuses the timer and invalidates it: it could never fire there.
    ///
    /// - Precondition: `timer` is not already bound to another loop (SPEC R33, M6).
    /// - Important: Safe from any thread.
    /// - Complexity: O(log n) in the number of timers of each mode.
    public func add(_ timer: LoopTimer, forMode mode: Mode) {
        let refused: Bool = change { change in
            // A loop that is shutting down or has ended would never fire it: refused, and the timer
            // is invalidated below so that `isValid` tells the truth.
            guard state.lifecycle.acceptsItems else { return true }
            guard bindTimer(timer) else { return false }
            if mode == .common {
                // SPEC R63: into every common mode it is missing from, also when it is a common
                // item already (and was removed from one of them, R64), as CFRunLoop does.
                _ = state.commonItems.insert(.timer(timer))
                for modeState in state.concreteModes(mode) { insert(timer, into: modeState) }
                change.movedTimersSomewhere()
            } else {
                let modeState = state.modeState(mode)
                insert(timer, into: modeState)
                change.movedTimers(in: modeState)
            }
            return false
        }
        if refused { timer.invalidate() }
    }

    /// Removes `timer` from `mode` (SPEC R63, R64). The timer stays valid.
    ///
    /// A loop sleeping until this timer re-arms its wait: no spurious wake-up at the old deadline
    /// (SPEC M7).
    ///
    /// - Important: Safe from any thread.
    /// - Complexity: O(log n) in the number of timers of each mode.
    public func remove(_ timer: LoopTimer, forMode mode: Mode) {
        change { change in
            guard isBound(timer) else { return }
            if mode == .common {
                guard state.commonItems.remove(timer) else { return }
            }
            for modeState in state.concreteModes(mode) {
                removeMembership(of: timer, from: modeState)
            }
            change.movedTimersSomewhere()
            change.removedItemsFromModes()  // SPEC M7: a sleeping run left empty returns at once
        }
    }

    /// True if `timer` is in `mode` (for ``Mode/common``: recorded as a common item).
    ///
    /// - Important: Safe from any thread.
    public func contains(_ timer: LoopTimer, inMode mode: Mode) -> Bool {
        lock.withLock {
            guard isBound(timer) else { return false }
            if mode == .common { return state.commonItems.contains(timer) }
            guard let modeState = state.modes[mode] else { return false }
            return timer.modes.contains(modeState)
        }
    }

    /// The earliest fire date of the timers of `mode` (of every common mode for ``Mode/common``),
    /// or `nil` if it has none (SPEC R44). A timer whose handler is running is not counted.
    ///
    /// - Important: Safe from any thread.
    public func nextFireDate(in mode: Mode) -> ContinuousClock.Instant? {
        withLockReleasingDroppedTimers {  // and the stale entries it pruned
            let modes =
                mode == .common
                ? state.commonModes.compactMap { state.modes[$0] } : [state.modes[mode]].compactMap { $0 }
            return modes.compactMap { $0.timerHeap.earliestFireDate() }.min().map(LoopTime.instant)
        }
    }

    /// The number of timers in `mode` (for ``Mode/common``: the number of common timers). A timer
    /// whose handler is running counts.
    ///
    /// - Important: Safe from any thread.
    public func timerCount(in mode: Mode) -> Int {
        lock.withLock {
            if mode == .common { return state.commonItems.timerCount }
            return state.modes[mode]?.timerCount ?? 0
        }
    }

    // MARK: - Internals

    /// Binds `timer` to this loop on first add (see `bind(_:)`) and gives it its sequence number.
    /// Lock held.
    private func bindTimer(_ timer: LoopTimer) -> Bool {
        guard bind(timer) else { return false }
        if timer.sequence == 0 {
            state.nextTimerSequence += 1
            timer.sequence = state.nextTimerSequence
        }
        return true
    }

    /// Adds a membership and, unless the timer is firing, a heap entry. Lock held.
    func insert(_ timer: LoopTimer, into modeState: ModeState) {
        guard !timer.modes.contains(modeState) else { return }
        timer.modes.append(modeState)
        modeState.timerCount += 1
        if !timer.isFiring {
            modeState.timerHeap.push(entry(for: timer, fireDate: timer.boundSchedule.fireDate))
        }
    }

    /// A heap entry for the timer's current fire date. Lock held.
    @inline(__always)
    private func entry(for timer: LoopTimer, fireDate: Int64) -> TimerHeap.Entry {
        TimerHeap.Entry(fireDate: fireDate, generation: timer.generation, timer: timer)
    }

    /// Makes every heap entry of `timer` stale (O(1) per mode). `popped` is a mode whose entry
    /// was already taken out of its heap. Lock held.
    private func retireEntries(of timer: LoopTimer, popped: ModeState? = nil) {
        // The generation first: noting an entry stale may compact the heap, which must see it so.
        timer.generation &+= 1
        if timer.generation == 0 {
            // Wrapped after 2^32 changes: a stale entry of this timer left in a mode that never
            // runs (and holds too few stale entries to compact) would look live again at its old
            // generation. Drop every stale entry of every mode now, once per wrap.
            for mode in state.modes.values { mode.timerHeap.compactStale() }
        }
        if !timer.isFiring {
            for mode in timer.modes where mode !== popped { mode.timerHeap.noteStale() }
        }
    }

    /// Gives `timer` a fresh entry in each of its modes. Lock held; the timer has none live.
    private func pushEntries(of timer: LoopTimer, fireDate: Int64) {
        let fresh = entry(for: timer, fireDate: fireDate)
        for mode in timer.modes { mode.timerHeap.push(fresh) }
    }

    /// Lock held.
    private func removeMembership(of timer: LoopTimer, from modeState: ModeState) {
        guard timer.modes.contains(modeState) else { return }
        let hadEntries = !timer.isFiring
        retireEntries(of: timer)
        timer.modes.remove(modeState)
        modeState.timerCount -= 1
        if hadEntries {
            pushEntries(of: timer, fireDate: timer.boundSchedule.fireDate)
        }
    }

    /// Removes the timer from every mode (a wait that was for it is re-armed, SPEC M7). Lock held.
    private func removeInvalidatedLocked(_ timer: LoopTimer, _ change: inout LoopChange) {
        change.movedTimers(in: timer.modes)
        retireEntries(of: timer)
        for modeState in timer.modes { modeState.timerCount -= 1 }
        timer.modes.removeAll()
        state.commonItems.remove(timer)
    }

    /// Invalidation: leave every mode (SPEC R39), re-arm a wait that was for this timer, and wake a
    /// loop whose sleeping mode it was the last to keep alive (SPEC M7).
    func removeInvalidated(_ timer: LoopTimer) {
        change { change in
            removeInvalidatedLocked(timer, &change)
            change.removedItemsFromModes()
        }
    }

    /// Applies a change to a bound timer's schedule and repositions it in all its modes
    /// (SPEC R40). Called by `LoopTimer` from any thread.
    func reschedule(_ timer: LoopTimer, _ update: (inout LoopTimer.Schedule) -> Void) {
        change { change in
            let fireDate: Int64? = timer.withValidSchedule {
                update(&$0)
                return $0.fireDate
            }
            guard let fireDate, !timer.isFiring else { return }
            retireEntries(of: timer)
            pushEntries(of: timer, fireDate: fireDate)
            change.movedTimers(in: timer.modes)
        }
    }

    /// Step 10, first half: fire the timers of the mode that are due (SPEC R34–R39, R42).
    @inline(__always)
    func fireDueTimers(_ run: RunContext) {
        let now = loopThread.now(waiter)
        // No lock, no call when nothing is due and nothing waits to be released.
        if run.mode.mayHaveTimersDue(at: now) || state.timerGraveyard.mayHaveEntries
            || !loopThread.timerBatches.isEmpty
        {
            fireDueTimers(run, now: now)
        }
    }

    @inline(never)
    private func fireDueTimers(_ run: RunContext, now: Int64) {
        var due = loopThread.dueTimers
        loopThread.dueTimers = []
        // SPEC R35: collected first, then fired in ascending fire date, ties in add order.
        var dead: [TimerHeap.Entry] = lock.withLock {
            if !run.mode.timerHeap.isEmpty {
                run.mode.timerHeap.popDue(asOf: now, into: &due)
            }
            if !loopThread.timerBatches.isEmpty { addOuterBatches(of: run.mode, asOf: now, to: &due) }
            return run.mode.timerHeap.takeGraveyard()
        }
        // Released outside the lock: a timer's last release may run user code (see TimerHeap).
        if !dead.isEmpty { releaseDropped(&dead) }
        if !due.isEmpty {
            // A big batch's references are given back after it, in memory order: a million timers
            // freed in deadline order scatter the allocator's free lists, and every allocation
            // after them (the next million timers) then misses the cache once or twice.
            let releaseAfterBatch = due.count >= TimerHeap.addressOrderThreshold
            let records = isInstrumented  // once per batch (Instruments/LoopInstruments.swift)
            if records && releaseAfterBatch { loopThread.timePassed() }  // sorting it took time
            due.withUnsafeBufferPointer { batch in
                // Visible to the nested runs of the callouts: only the entries after the one firing,
                // whose references the batch still owns (a small batch gives each back right after
                // its callout, and the timer may be gone then). Not retained: the buffer is
                // unchanged meanwhile, and this pass outlives its callouts' nested runs.
                let mode = Unmanaged.passUnretained(run.mode)
                loopThread.timerBatches.push((UnsafeBufferPointer(rebasing: batch[...]), mode))
                defer { loopThread.timerBatches.pop() }
                for index in batch.indices {
                    loopThread.timerBatches.replaceTop((UnsafeBufferPointer(rebasing: batch[(index + 1)...]), mode))
                    // A big batch touches a timer object per entry in deadline order, not memory
                    // order: start loading the ones a few entries ahead so the misses overlap.
                    if index + Self.prefetchDistance < batch.count {
                        let address = UnsafeRawPointer(batch[index + Self.prefetchDistance].timerRef.toOpaque())
                        cloop_prefetch(address)
                        cloop_prefetch(address + 64)
                    }
                    let entry = batch[index]
                    entry.withTimer { fire($0, entry, poppedFrom: run.mode, records: records) }
                    if !releaseAfterBatch { TimerHeap.release(entry) }
                }
            }
            if releaseAfterBatch {
                TimerHeap.release(&due)  // and gives the big buffer back
            } else {
                due.removeAll(keepingCapacity: true)
            }
        }
        loopThread.dueTimers = due
    }

    /// A nested run in the mode of an outer pass that is firing its due timers fires those of them
    /// that are still waiting for their turn, as CFRunLoop does (SPEC R42 skips only the timer
    /// that is firing); the outer pass then finds their entries stale. Each is added with a
    /// retain of its own, in date order. An outer batch shows only the entries after the one it
    /// is firing (see `fireDueTimers`): those before may have been given back already. Lock held.
    private func addOuterBatches(of mode: ModeState, asOf now: Int64, to due: inout [TimerHeap.Entry]) {
        let start = due.count
        let modeAddress = Unmanaged.passUnretained(mode).toOpaque()  // compared only, never used
        loopThread.timerBatches.forEach { outer in
            guard outer.mode.toOpaque() == modeAddress else { return }
            for entry in outer.entries where entry.fireDate <= now {
                let waiting = entry.withTimer { $0.generation == entry.generation && !$0.isFiring }
                if waiting {
                    _ = entry.timerRef.retain()
                    due.append(entry)
                }
            }
        }
        guard due.count > start else { return }
        due.sort(by: TimerHeap.precedes)  // the heap's own order: (fire date, add order)
    }

    /// Releases timer-heap entries dropped by invalidations, removals and moves (outside the lock:
    /// a timer's last release may run user code). The memory they free stays with the allocator;
    /// handing it back to the system is the application's call (`Loop.returnFreeMemory()`).
    func releaseDropped(_ dead: inout [TimerHeap.Entry]) {
        TimerHeap.release(&dead)
    }

    /// Runs `body` under the loop's lock, then gives back, after unlocking, the timer entries that
    /// were dropped and not released yet (by `body` or before it): for locked sections after
    /// which no timer step of a pass may come for a long time.
    @inline(__always)
    func withLockReleasingDroppedTimers<R>(_ body: () -> R) -> R {
        let (result, dropped) = lock.withLock { (body(), state.timerGraveyard.takeIfAny()) }
        if var dropped { releaseDropped(&dropped) }
        return result
    }

    /// How many due timers ahead `fireDueTimers` prefetches: enough to cover a memory latency with
    /// the work of firing the ones in between, few enough to stay in the L1 cache.
    private static let prefetchDistance = 8

    /// Fires one due entry's timer (borrowed from the entry's retain).
    private func fire(_ timer: LoopTimer, _ entry: TimerHeap.Entry, poppedFrom mode: ModeState, records: Bool) {
        let serviced: Int64? = lock.withLock {
            // Moved, removed, invalidated or fired by an earlier callout of this batch: the entry
            // went stale (and the change pushed whatever entries the timer needs now).
            guard entry.generation == timer.generation, !timer.isFiring else {
                return timer.isFiring ? nil : startFiringMoved(timer, in: mode)
            }
            // SPEC R42: while firing, the timer has no live entry, so nested runs skip it and
            // waits ignore it. Its entry in this mode was popped already. A timer invalidated on
            // another thread whose entries are not retired yet is caught by the callout gate.
            retireEntries(of: timer, popped: mode)
            timer.isFiring = true
            return entry.fireDate
        }
        guard let serviced else { return }

        // The callout gate (Loop+Callouts.swift): `invalidate()` from another thread waits for it.
        var recorded = false
        let called = callout(of: timer) {
            recorded =
                records
                && instrumentCalloutBegins(
                    .timer, label: timer.label, lateness: LoopTime.distance(from: serviced, to: loopThread.now(waiter)))
            timer.handler(timer)
        }
        guard called else {
            // Invalidated meanwhile: leave every mode now, while the timer is still marked firing
            // (it has no live entries to retire); the invalidation's own removal then finds
            // nothing left to do.
            change { endFiring(ofInvalid: timer, &$0) }
            return
        }
        if recorded { instrumentCalloutEnded() }
        loopThread.timePassed()
        // After the callout: SPEC R37 counts from the real now.
        let now = timer.isRepeating ? loopThread.now(waiter) : 0

        change { change in
            guard timer.isRepeating else {
                // SPEC R36: a one-shot timer is invalidated right after its callout returns.
                timer.markInvalid()
                endFiring(ofInvalid: timer, &change)
                return
            }
            let fireDate: Int64? = timer.withValidSchedule {  // nil if invalid: SPEC R39
                // SPEC R38: a date set during the callout counts as now if it is in the past (R32);
                // then, if later than the date serviced, it is kept (a past date: due again at once);
                // otherwise R37 applies.
                if $0.fireDate != serviced { $0.fireDate = max($0.fireDate, now) }
                if $0.fireDate <= serviced {
                    $0.fireDate = Self.nextFireDate(after: serviced, interval: timer.intervalNanoseconds, now: now)
                }
                return $0.fireDate
            }
            guard let fireDate else {  // invalidated during or right after its callout
                endFiring(ofInvalid: timer, &change)
                return
            }
            timer.isFiring = false
            pushEntries(of: timer, fireDate: fireDate)
        }
    }

    /// SPEC R35: a timer of the batch that an earlier callout moved keeps its turn if it is still
    /// in this mode and due when its turn comes (CFRunLoop re-checks the date of each collected
    /// timer then); moved later, it waits for its date. Its live entry in this mode is still in
    /// the heap: retired with the others. The date it fires for, or `nil`. Lock held; out of line,
    /// off the batch's hot path.
    @inline(never)
    private func startFiringMoved(_ timer: LoopTimer, in mode: ModeState) -> Int64? {
        let schedule = timer.boundSchedule
        guard timer.modes.contains(mode), schedule.fireDate <= loopThread.now(waiter) else { return nil }
        retireEntries(of: timer)
        timer.isFiring = true
        return schedule.fireDate
    }

    /// Ends the firing of a timer that is invalid now (found so by the callout gate, invalidated
    /// during its callout, or a one-shot that fired): it leaves every mode while still marked
    /// firing, so that nothing counts entries it no longer has, and an invalidation's own removal
    /// finds nothing left to do. On the loop's thread (no wake-up to decide). Lock held.
    private func endFiring(ofInvalid timer: LoopTimer, _ change: inout LoopChange) {
        removeInvalidatedLocked(timer, &change)
        timer.isFiring = false
    }

    /// SPEC R37: the scheduled date plus the smallest whole number of intervals that lands
    /// strictly after `now` — one firing for all missed points, phase kept.
    static func nextFireDate(after scheduled: Int64, interval: Int64, now: Int64) -> Int64 {
        let elapsed = max(0, LoopTime.distance(from: scheduled, to: now))
        // Scheduled before the start of loop time (a date clamped to `Int64.min`): no phase to keep.
        if elapsed == .max { return LoopTime.adding(interval, to: now) }
        let intervals = elapsed / interval + 1
        let (offset, overflow) = intervals.multipliedReportingOverflow(by: interval)
        return overflow ? LoopTime.distantFuture : LoopTime.adding(offset, to: scheduled)
    }
}
