// How a timer is kept in its modes: memberships, deadline-heap entries and moves (SPEC R33,
// R40, R41). Every function here runs with the loop's lock held unless it says otherwise.

extension Loop {
    /// Binds `timer` to this loop on first add (see `bind(_:)`) and gives it its sequence number.
    /// Lock held.
    func bindTimer(_ timer: LoopTimer) -> Bool {
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
    func entry(for timer: LoopTimer, fireDate: Int64) -> TimerHeap.Entry {
        TimerHeap.Entry(fireDate: fireDate, generation: timer.generation, timer: timer)
    }

    /// Makes every heap entry of `timer` stale (O(1) per mode). `popped` is a mode whose entry
    /// was already taken out of its heap. Lock held.
    func retireEntries(of timer: LoopTimer, popped: ModeState? = nil) {
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
    func pushEntries(of timer: LoopTimer, fireDate: Int64) {
        let fresh = entry(for: timer, fireDate: fireDate)
        for mode in timer.modes { mode.timerHeap.push(fresh) }
    }

    /// Lock held.
    func removeMembership(of timer: LoopTimer, from modeState: ModeState) {
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
    func removeInvalidatedLocked(_ timer: LoopTimer, _ change: inout LoopChange) {
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
}
