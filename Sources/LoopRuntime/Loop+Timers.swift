extension Loop {
    /// Adds `timer` to `mode` (every common mode for ``Mode/common``, SPEC R63).
    ///
    /// The timer shares one schedule across all its modes; adding it again to a mode does nothing,
    /// and adding an invalid timer does nothing (SPEC R33). A loop sleeping in `mode` re-arms its
    /// wait for the timer without needing a wake-up (SPEC R41).
    ///
    /// - Precondition: `timer` is not already bound to another loop (SPEC R33, M6).
    /// - Important: Safe from any thread.
    /// - Complexity: O(log n) in the number of timers of each mode.
    public func add(_ timer: LoopTimer, forMode mode: Mode) {
        lock.withLock {
            guard !state.isTornDown, bind(timer) else { return }
            if mode == .common {
                guard state.commonTimers.updateValue(timer, forKey: ObjectIdentifier(timer)) == nil
                else { return }
            }
            let modes = state.concreteModes(mode)
            for modeState in modes {
                insert(timer, into: modeState)
            }
            rearmIfSleeping(in: modes)
        }
    }

    /// Removes `timer` from `mode` (SPEC R63, R64). The timer stays valid.
    ///
    /// A loop sleeping until this timer re-arms its wait: no spurious wake-up at the old deadline
    /// (SPEC M7).
    ///
    /// - Important: Safe from any thread.
    /// - Complexity: O(log n) in the number of timers of each mode.
    public func remove(_ timer: LoopTimer, forMode mode: Mode) {
        lock.withLock {
            guard isBound(timer) else { return }
            if mode == .common {
                guard state.commonTimers.removeValue(forKey: ObjectIdentifier(timer)) != nil
                else { return }
            }
            let modes = state.concreteModes(mode)
            for modeState in modes {
                removeMembership(of: timer, from: modeState)
            }
            rearmIfSleeping(in: modes)
        }
    }

    /// True if `timer` is in `mode` (for ``Mode/common``: recorded as a common item).
    ///
    /// - Important: Safe from any thread.
    public func contains(_ timer: LoopTimer, inMode mode: Mode) -> Bool {
        lock.withLock {
            guard isBound(timer) else { return false }
            if mode == .common { return state.commonTimers[ObjectIdentifier(timer)] != nil }
            guard let modeState = state.modes[mode] else { return false }
            return timer.memberships.contains { $0.mode === modeState }
        }
    }

    /// The earliest fire date of the timers of `mode` (of every common mode for ``Mode/common``),
    /// or `nil` if it has none (SPEC R44). A timer whose handler is running is not counted.
    ///
    /// - Important: Safe from any thread.
    public func nextFireDate(in mode: Mode) -> ContinuousClock.Instant? {
        lock.withLock {
            let modes = mode == .common ? state.commonModes.compactMap { state.modes[$0] } : [state.modes[mode]].compactMap { $0 }
            return modes.compactMap(\.timerHeap.earliestFireDate).min().map(LoopTime.instant)
        }
    }

    // MARK: - Internals

    /// Binds `timer` to this loop on first add and gives it its sequence number; traps if it
    /// belongs to another loop (SPEC M6). Returns false for an invalid timer. Lock held.
    private func bind(_ timer: LoopTimer) -> Bool {
        let outcome: BindOutcome = timer.shared.withLock {
            guard $0.isValid else { return .invalid }
            return BindOutcome.bind(&$0.isBound, &$0.loop, to: self)
        }
        guard outcome.proceed(item: "LoopTimer", rule: "R33", into: self) else { return false }
        if timer.sequence == 0 {
            state.nextTimerSequence += 1
            timer.sequence = state.nextTimerSequence
        }
        return true
    }

    private func isBound(_ timer: LoopTimer) -> Bool {
        timer.shared.withLock { $0.loop === self }
    }

    /// Adds a membership and, unless the timer is firing, a heap entry. Lock held.
    func insert(_ timer: LoopTimer, into modeState: ModeState) {
        guard !timer.memberships.contains(where: { $0.mode === modeState }) else { return }
        let membership = TimerMembership(timer: timer, mode: modeState)
        timer.memberships.append(membership)
        modeState.timerCount += 1
        if !timer.isFiring {
            let (fireDate, tolerance) = timer.shared.withLock { ($0.fireDate, $0.tolerance) }
            modeState.timerHeap.insert(entry(for: membership, fireDate: fireDate, tolerance: tolerance))
        }
    }

    private func entry(for membership: TimerMembership, fireDate: Int64, tolerance: Int64)
        -> TimerHeap.Entry
    {
        TimerHeap.Entry(
            fireDate: fireDate, latest: LoopTime.adding(tolerance, to: fireDate),
            sequence: membership.timer.sequence, membership: membership)
    }

    /// Lock held.
    private func removeMembership(of timer: LoopTimer, from modeState: ModeState) {
        guard let index = timer.memberships.firstIndex(where: { $0.mode === modeState }) else { return }
        let membership = timer.memberships.remove(at: index)
        if membership.heapIndex >= 0 { modeState.timerHeap.remove(at: membership.heapIndex) }
        modeState.timerCount -= 1
    }

    /// Invalidation: leave every mode (SPEC R39) and re-arm a wait that was for this timer (M7).
    func detach(_ timer: LoopTimer) {
        lock.withLock {
            let modes = timer.memberships.map(\.mode)
            for modeState in modes {
                removeMembership(of: timer, from: modeState)
            }
            state.commonTimers.removeValue(forKey: ObjectIdentifier(timer))
            rearmIfSleeping(in: modes)
        }
    }

    /// Applies a change to a bound timer's schedule and repositions it in all its modes
    /// (SPEC R40). Called by `LoopTimer` from any thread.
    func reschedule(_ timer: LoopTimer, _ change: (inout LoopTimer.Shared) -> Void) {
        lock.withLock {
            let dates: (Int64, Int64)? = timer.shared.withLock {
                guard $0.isValid else { return nil }
                change(&$0)
                return ($0.fireDate, $0.tolerance)
            }
            guard let (fireDate, tolerance) = dates, !timer.isFiring else { return }
            let latest = LoopTime.adding(tolerance, to: fireDate)
            for membership in timer.memberships where membership.heapIndex >= 0 {
                membership.mode.timerHeap.update(
                    at: membership.heapIndex, fireDate: fireDate, latest: latest)
            }
            rearmIfSleeping(in: timer.memberships.lazy.map(\.mode))
        }
    }

    /// Step 10, first half: fire the timers of the mode that are due (SPEC R34–R39, R42).
    func fireDueTimers(_ run: RunContext) {
        let now = waiter.now()
        var due = scratch.dueTimers
        scratch.dueTimers = []
        lock.withLock {
            run.mode.timerHeap.collectDue(asOf: now, into: &due)
        }
        if !due.isEmpty {
            // SPEC R35: collected first, then fired in ascending fire date, ties in add order.
            if due.count > 1 { due.sort { $0.firesBefore($1) } }
            for entry in due {
                fire(entry.membership.timer, dueAsOf: now)
            }
            due.removeAll(keepingCapacity: true)
        }
        scratch.dueTimers = due
    }

    private func fire(_ timer: LoopTimer, dueAsOf now: Int64) {
        let serviced: Int64? = lock.withLock {
            // A timer moved, invalidated or already fired by an earlier callout of the batch is
            // checked again here.
            guard !timer.isFiring else { return nil }
            let fireDate: Int64? = timer.shared.withLock {
                $0.isValid && $0.fireDate <= now ? $0.fireDate : nil
            }
            guard let fireDate else { return nil }
            // SPEC R42: while firing, the timer is out of every heap, so nested runs skip it and
            // the wait ignores it.
            timer.isFiring = true
            for membership in timer.memberships where membership.heapIndex >= 0 {
                membership.mode.timerHeap.remove(at: membership.heapIndex)
            }
            return fireDate
        }
        guard let serviced else { return }

        timer.handler(timer)

        guard timer.isRepeating else {
            lock.withLock { timer.isFiring = false }
            timer.invalidate()  // SPEC R36
            return
        }
        lock.withLock {
            timer.isFiring = false
            let dates: (Int64, Int64)? = timer.shared.withLock {
                guard $0.isValid else { return nil }  // SPEC R39
                // SPEC R38: a later date set during the callout is kept; otherwise R37.
                if $0.fireDate <= serviced {
                    $0.fireDate = Self.nextFireDate(
                        after: serviced, interval: timer.intervalNanoseconds, now: waiter.now())
                }
                return ($0.fireDate, $0.tolerance)
            }
            guard let (fireDate, tolerance) = dates else { return }
            for membership in timer.memberships where membership.heapIndex < 0 {
                membership.mode.timerHeap.insert(
                    entry(for: membership, fireDate: fireDate, tolerance: tolerance))
            }
        }
    }

    /// SPEC R37: the scheduled date plus the smallest whole number of intervals that lands
    /// strictly after `now` — one firing for all missed points, phase kept.
    static func nextFireDate(after scheduled: Int64, interval: Int64, now: Int64) -> Int64 {
        let elapsed = max(0, now - scheduled)
        let intervals = elapsed / interval + 1
        let (offset, overflow) = intervals.multipliedReportingOverflow(by: interval)
        return overflow ? LoopTime.distantFuture : LoopTime.adding(offset, to: scheduled)
    }
}
