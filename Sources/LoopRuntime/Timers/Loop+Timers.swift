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
    public func contains(_ timer: LoopTimer, forMode mode: Mode) -> Bool {
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
    public func nextFireDate(forMode mode: Mode) -> ContinuousClock.Instant? {
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
    public func timerCount(forMode mode: Mode) -> Int {
        lock.withLock {
            if mode == .common { return state.commonItems.timerCount }
            return state.modes[mode]?.timerCount ?? 0
        }
    }
}
