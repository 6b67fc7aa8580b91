extension Loop {
    /// Adds `observer` to `mode` (every common mode for ``Mode/common``, SPEC R63).
    ///
    /// Adding an observer to a mode it is already in does nothing; adding an invalid observer does
    /// nothing. The observer joins this notification order at the end of its `order` (SPEC R25).
    /// A loop that is shutting down or has ended refuses the observer and invalidates it.
    ///
    /// - Precondition: `observer` is not already bound to another loop (SPEC R26, M6).
    /// - Important: Safe from any thread.
    public func add(_ observer: LoopObserver, forMode mode: Mode) {
        add(observer, forMode: mode, whileDraining: false)
    }

    /// The public `add(_:forMode:)`; with `whileDraining`, a draining loop accepts the
    /// observer too (only an ended one refuses it). For the engine's own items that must be there
    /// while the drain runs, like a ``LoopDriver``'s guardian.
    func add(_ observer: LoopObserver, forMode mode: Mode, whileDraining: Bool) {
        let refused: Bool = change { _ in  // observers never wake a loop (SPEC R30)
            // A loop that is shutting down or has ended refuses it (invalidated below).
            guard whileDraining ? state.lifecycle.acceptsWork : state.lifecycle.acceptsItems else {
                return true
            }
            guard bind(observer) else { return false }
            // SPEC R63: into every common mode it is missing from, also when it is a common item
            // already (and was removed from one of them, R64), as CFRunLoop does.
            if mode == .common { _ = state.commonItems.insert(.observer(observer)) }
            for modeState in state.concreteModes(mode) {
                insert(observer, into: modeState)
            }
            return false
        }
        if refused { observer.invalidate() }
    }

    /// Removes `observer` from `mode` (SPEC R63, R64). The observer stays valid.
    ///
    /// Removing it from ``Mode/common`` removes it from every common mode; removing a common
    /// observer from one concrete mode affects only that mode. A notification already under way
    /// still calls it (SPEC R27).
    ///
    /// - Important: Safe from any thread.
    public func remove(_ observer: LoopObserver, forMode mode: Mode) {
        change { _ in
            guard isBound(observer) else { return }
            if mode == .common {
                guard state.commonItems.remove(observer) else { return }
            }
            for modeState in state.concreteModes(mode) {
                removeMembership(of: observer, from: modeState)
            }
        }
    }

    /// True if `observer` is in `mode` (for ``Mode/common``: recorded as a common item).
    ///
    /// - Important: Safe from any thread.
    public func contains(_ observer: LoopObserver, forMode mode: Mode) -> Bool {
        lock.withLock {
            guard isBound(observer) else { return false }
            if mode == .common { return state.commonItems.contains(observer) }
            guard let modeState = state.modes[mode] else { return false }
            return observer.memberships.contains { $0 === modeState }
        }
    }

    /// Adds a membership in notification order (SPEC R25). Lock held.
    func insert(_ observer: LoopObserver, into modeState: ModeState) {
        guard !observer.memberships.contains(where: { $0 === modeState }) else { return }
        observer.memberships.append(modeState)
        // After every observer with an order ≤ this one: equal orders keep insertion order.
        let index =
            modeState.observers.firstIndex { $0.order > observer.order } ?? modeState.observers.endIndex
        modeState.observers.insert(observer, at: index)
        observersChanged(in: modeState)
    }

    /// Lock held.
    private func removeMembership(of observer: LoopObserver, from modeState: ModeState) {
        guard let index = observer.memberships.firstIndex(where: { $0 === modeState }) else { return }
        observer.memberships.remove(at: index)
        modeState.observers.removeAll { $0 === observer }
        observersChanged(in: modeState)
    }

    /// Invalidation: leave every mode (SPEC R31).
    func removeInvalidated(_ observer: LoopObserver) {
        change { _ in
            for modeState in observer.memberships {
                modeState.observers.removeAll { $0 === observer }
                observersChanged(in: modeState)
            }
            observer.memberships.removeAll()
            state.commonItems.remove(observer)
        }
    }

    /// Notifies the observers of `run`'s mode of `activity` (SPEC R24–R29). Costs one relaxed load
    /// when no observer of the mode wants the activity. (The run is borrowed whole: handed its
    /// mode alone, the compiler retained and released the mode around every notification.)
    @inline(__always)
    func notifyObservers(_ activity: Activity, of run: borrowing RunContext) {
        guard run.mode.observerActivities.load(ordering: .relaxed) & activity.rawValue != 0 else {
            return
        }
        callObservers(activity, run.mode)
    }

    /// After a change of `modeState.observers`. Lock held.
    func observersChanged(in modeState: ModeState) {
        modeState.recomputeObserverActivities()
        state.observersChanged.store(true, ordering: .releasing)
    }

    /// Lets go of the loop thread's stale observer snapshots (of every mode: the mode whose
    /// observer was removed may never run again), so that they never keep removed observers and
    /// what their closures hold alive. Called by the loop's thread when a run call returns and
    /// before it sleeps: one relaxed load unless an observer was added or removed meanwhile.
    @inline(__always)
    func dropStaleObserverSnapshots() {
        if state.observersChanged.load(ordering: .relaxed) { dropStaleObserverSnapshotsNow() }
    }

    @inline(never)
    private func dropStaleObserverSnapshotsNow() {
        let dropped: [[LoopObserver]] = lock.withLock {
            state.observersChanged.store(false, ordering: .relaxed)
            var dropped: [[LoopObserver]] = []
            for mode in state.modes.values where !mode.observerSnapshot.isEmpty {
                guard mode.observersVersion.load(ordering: .relaxed) != mode.observerSnapshotVersion else { continue }
                dropped.append(mode.observerSnapshot)
                mode.observerSnapshot = []
            }
            return dropped
        }
        _ = dropped  // released after unlocking: an observer's last release may run user code
    }

    private func callObservers(_ activity: Activity, _ mode: ModeState) {
        // SPEC R27: a snapshot. Observers added meanwhile are not called this time; those
        // invalidated before their turn are skipped; those merely removed are still called.
        // The observers as of now: the loop thread's snapshot while no change was made since it was
        // taken (a change in progress has not returned yet: it may count as made after this), or
        // a fresh one under the lock.
        let version = mode.observersVersion.load(ordering: .acquiring)
        if version != mode.observerSnapshotVersion || mode.observerSnapshot.isEmpty {
            mode.observerSnapshot = lock.withLock { mode.observers }
            mode.observerSnapshotVersion = version
        }
        // Held for the whole notification: a nested run may replace the mode's snapshot. The
        // snapshot holds every observer in it, so they are used unretained below (a retain and a
        // release per observer and per event otherwise: the activity stream's largest cost).
        let snapshot = mode.observerSnapshot
        let outerNotification = confined.notifiedMode  // a nested run's notifications come back here
        confined.notifiedMode = Unmanaged.passUnretained(mode)
        defer { confined.notifiedMode = outerNotification }
        // Once per notification (Instruments/LoopInstruments.swift): the loop without instruments
        // is the plain one.
        let records = isInstrumented
        snapshot.withUnsafeBufferPointer { observers in
            for index in observers.indices {
                Unmanaged.passUnretained(observers[index])._withUnsafeGuaranteedRef { observer in
                    if records {
                        notifyRecorded(observer, activity)
                    } else {
                        notify(observer, activity)
                    }
                }
            }
        }
    }

    /// One observer's callout, if it wants `activity` and may hear it.
    @inline(__always)
    private func notify(_ observer: LoopObserver, _ activity: Activity) {
        if hears(observer, activity) { call(observer, activity) }
    }

    /// ``notify(_:_:)`` with the callout recorded by the instruments (except the package's own
    /// bookkeeping observers).
    @inline(never)
    private func notifyRecorded(_ observer: LoopObserver, _ activity: Activity) {
        guard hears(observer, activity) else { return }
        let recorded = observer.isRecorded && instrumentCalloutBegins(.observer, label: observer.label)
        call(observer, activity)
        if recorded { instrumentCalloutEnded() }
    }

    /// The observer wants `activity` and may hear it now.
    @inline(__always)
    private func hears(_ observer: LoopObserver, _ activity: Activity) -> Bool {
        guard observer.activities.contains(activity) else { return false }
        // SPEC R29: an observer whose callout is running hears nothing, nested runs included.
        return observer.isValid && !observer.isInCallout
    }

    /// Calls an observer that ``hears(_:_:)`` the activity, behind the callout gate
    /// (Loop+Callouts.swift): `invalidate()` from another thread waits for the handler to return.
    @inline(__always)
    private func call(_ observer: LoopObserver, _ activity: Activity) {
        observer.isInCallout = true
        let called = callout(of: observer) { observer.handler(observer, activity) }
        observer.isInCallout = false
        guard called else { return }
        if !observer.repeats { observer.invalidate() }  // SPEC R28
        // A user's observer may have run for any time: the clock is read again when next needed
        // (by the observers after it, too). Recording observers (the activity stream) return at
        // once and leave the reading shared.
        if !observer.takesNoTime { confined.timePassed() }
    }
}
