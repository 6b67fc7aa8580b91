import CLoopRuntimeShims

// Step 10 of a pass: the due timers fire, in deadline order, in batches when many are due
// (SPEC R34–R39, R42).

extension Loop {
    /// Step 10, first half: fire the timers of the mode that are due (SPEC R34–R39, R42).
    @inline(__always)
    func fireDueTimers(_ run: RunContext) {
        let now = confined.now(waiter)
        // No lock, no call when nothing is due and nothing waits to be released.
        if run.mode.mayHaveTimersDue(at: now) || state.timerGraveyard.mayHaveEntries
            || !confined.timerBatches.isEmpty
        {
            fireDueTimers(run, now: now)
        }
    }

    @inline(never)
    private func fireDueTimers(_ run: RunContext, now: Int64) {
        var due = confined.dueTimers
        confined.dueTimers = []
        // SPEC R35: collected first, then fired in ascending fire date, ties in add order.
        var dead: [TimerHeap.Entry] = lock.withLock {
            if !run.mode.timerHeap.isEmpty {
                run.mode.timerHeap.popDue(asOf: now, into: &due)
            }
            if !confined.timerBatches.isEmpty { addOuterBatches(of: run.mode, asOf: now, to: &due) }
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
            if records && releaseAfterBatch { confined.timePassed() }  // sorting it took time
            due.withUnsafeBufferPointer { batch in
                // Visible to the nested runs of the callouts: only the entries after the one firing,
                // whose references the batch still owns (a small batch gives each back right after
                // its callout, and the timer may be gone then). Not retained: the buffer is
                // unchanged meanwhile, and this pass outlives its callouts' nested runs.
                let mode = Unmanaged.passUnretained(run.mode)
                confined.timerBatches.push((UnsafeBufferPointer(rebasing: batch[...]), mode))
                defer { confined.timerBatches.pop() }
                for index in batch.indices {
                    confined.timerBatches.replaceTop((UnsafeBufferPointer(rebasing: batch[(index + 1)...]), mode))
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
        confined.dueTimers = due
    }

    /// A nested run in the mode of an outer pass that is firing its due timers fires those of them
    /// that are still waiting for their turn, as CFRunLoop does (SPEC R42 skips only the timer
    /// that is firing); the outer pass then finds their entries stale. Each is added with a
    /// retain of its own, in date order. An outer batch shows only the entries after the one it
    /// is firing (see `fireDueTimers`): those before may have been given back already. Lock held.
    private func addOuterBatches(of mode: ModeState, asOf now: Int64, to due: inout [TimerHeap.Entry]) {
        let start = due.count
        let modeAddress = Unmanaged.passUnretained(mode).toOpaque()  // compared only, never used
        confined.timerBatches.forEach { outer in
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
                    .timer, label: timer.label, lateness: LoopTime.distance(from: serviced, to: confined.now(waiter)))
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
        confined.timePassed()
        // After the callout: SPEC R37 counts from the real now.
        let now = timer.isRepeating ? confined.now(waiter) : 0

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
        guard timer.modes.contains(mode), schedule.fireDate <= confined.now(waiter) else { return nil }
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
