extension Loop {
    /// Adds `source` to `mode` (every common mode for ``Mode/common``, SPEC R63) and calls its
    /// `schedule` callback once per concrete mode it enters (SPEC R51).
    ///
    /// Adding a source to a mode it is already in does nothing; adding an invalid source does
    /// nothing (SPEC R52). A source can be in several loops. If it is already signalled, a loop
    /// running that mode performs it at its next pass.
    ///
    /// A loop that is shutting down or has ended refuses the source (it would never be performed
    /// there) and returns `false`; the source stays valid, since it may serve other loops.
    ///
    /// - Returns: `false` if the loop refused the source because it is shutting down or has ended.
    /// - Important: Safe from any thread; `schedule` runs on the calling thread.
    @discardableResult
    public func add(_ source: LoopSource, forMode mode: Mode) -> Bool {
        add(source, forMode: mode, whileDraining: false)
    }

    /// The public `add(_:forMode:)`; with `whileDraining`, a draining loop accepts the source
    /// too (only an ended one refuses it). For the engine's own items, like a ``LoopDriver``'s
    /// keep-alive source.
    @discardableResult
    func add(_ source: LoopSource, forMode mode: Mode, whileDraining: Bool) -> Bool {
        let id = ObjectIdentifier(source)
        let entered: [Mode]? = change { _ in
            guard whileDraining ? state.lifecycle.acceptsWork : state.lifecycle.acceptsItems else {
                return nil
            }
            guard source.isValid else { return [] }
            // SPEC R63: added to every common mode it is missing from — also when it is a common
            // item already (and was removed from one of them, R64), as CFRunLoop does.
            let newlyCommon = mode == .common && state.commonItems.insert(.source(source))
            let added = state.concreteModes(mode).filter { $0.sources[id] == nil }
            // Registration and the validity check happen under the source's lock, which
            // `invalidate()` also takes: an add racing an invalidation never leaves the source behind.
            guard updateRegistration(of: source, modeCount: added.count) else {
                if newlyCommon { state.commonItems.remove(source) }
                return []
            }
            for modeState in added { modeState.sources[id] = source }
            if source.isSignalled { queueSignalled(source) }
            return added.map(\.mode)
        }
        guard let entered else { return false }
        for mode in entered {
            source.scheduleHandler?(self, mode)
        }
        // SPEC R51: a sleeping loop hears of an already signalled source after its schedule
        // callbacks, so it is never performed before them.
        if source.isSignalled { change { $0.signalled(id) } }
        return true
    }

    /// Removes `source` from `mode` and calls its `cancel` callback once per concrete mode it
    /// leaves (SPEC R51, R63, R64). The source stays valid.
    ///
    /// - Important: Safe from any thread; `cancel` runs on the calling thread.
    public func remove(_ source: LoopSource, forMode mode: Mode) {
        let id = ObjectIdentifier(source)
        let left: [Mode] = change { change in
            if mode == .common {
                guard state.commonItems.remove(source) else { return [] }
            }
            var left: [Mode] = []
            for modeState in state.concreteModes(mode)
            where modeState.sources.removeValue(forKey: id) != nil {
                left.append(modeState.mode)
            }
            _ = updateRegistration(of: source, modeCount: -left.count)
            change.removedItemsFromModes()  // SPEC M7: a sleeping run left empty returns at once
            return left
        }
        for mode in left {
            source.cancelHandler?(self, mode)
        }
    }

    /// True if `source` is in `mode` (for ``Mode/common``: recorded as a common item).
    ///
    /// - Important: Safe from any thread.
    public func contains(_ source: LoopSource, forMode mode: Mode) -> Bool {
        let id = ObjectIdentifier(source)
        return lock.withLock {
            if mode == .common { return state.commonItems.contains(source) }
            return state.modes[mode]?.sources[id] != nil
        }
    }

    // MARK: - Internals

    /// Adds a common source to a mode that just became common (SPEC R62); true if it was added
    /// (the caller then calls its `schedule` callback, after unlocking). Lock held.
    func insert(_ source: LoopSource, into modeState: ModeState) -> Bool {
        let id = ObjectIdentifier(source)
        guard modeState.sources[id] == nil else { return false }
        // A common source removed from every concrete mode (SPEC R64) has no registration with
        // this loop any more: this makes it again, so that its signals reach the loop (found by
        // the differential tests: it was left in the mode, deaf).
        guard updateRegistration(of: source, modeCount: 1) else { return false }
        modeState.sources[id] = source
        if source.isSignalled { queueSignalled(source) }
        return true
    }

    /// Updates the source's record of how many modes of this loop it is in; false (and no change)
    /// if the source is invalid. Loop lock held.
    private func updateRegistration(of source: LoopSource, modeCount delta: Int) -> Bool {
        let id = ObjectIdentifier(self)
        return source.withRegistrations { registrations in
            guard source.valid.load(ordering: .relaxed) else { return false }
            let count = (registrations[id]?.modeCount ?? 0) + delta
            if count > 0 {
                registrations[id] = LoopSource.Registration(loop: self, modeCount: count)
            } else {
                registrations.removeValue(forKey: id)
            }
            return true
        }
    }

    /// Invalidation: leave every mode of this loop, then call `cancel` per mode (SPEC R51, R52).
    func removeInvalidated(_ source: LoopSource) {
        let id = ObjectIdentifier(source)
        let loopID = ObjectIdentifier(self)
        let left: [Mode] = change { change in
            var left: [Mode] = []
            for modeState in state.modes.values where modeState.sources.removeValue(forKey: id) != nil {
                left.append(modeState.mode)
            }
            state.commonItems.remove(source)
            source.withRegistrations { _ = $0.removeValue(forKey: loopID) }
            change.removedItemsFromModes()  // SPEC M7
            return left
        }
        for mode in left {
            source.cancelHandler?(self, mode)
        }
    }

    /// Called by `LoopSource.signal()` for each loop the source is in (SPEC R45, M2).
    func sourceWasSignalled(_ source: LoopSource) {
        let id = ObjectIdentifier(source)
        change { change in
            guard state.lifecycle.acceptsWork else { return }
            queueSignalled(source)
            change.signalled(id)
        }
    }

    /// Lock held. Each source is listed at most once, however often it is signalled.
    private func queueSignalled(_ source: LoopSource) {
        if !state.signalledSources.contains(where: { $0 === source }) {
            state.signalledSources.append(source)
        }
    }

    /// Step 4: perform the signalled sources of the mode in (order, first-signal) order
    /// (SPEC R46–R49). Returns true if one was performed (SPEC R15, M8).
    @inline(__always)
    func performSignalledSources(_ run: RunContext) -> Bool {
        // No lock, no call when none is signalled (and no outer pass is performing sources).
        (state.mayHaveSignalledSources || !confined.sourceBatches.isEmpty) && performSignalledSourcesLocked(run)
    }

    @inline(never)
    private func performSignalledSourcesLocked(_ run: RunContext) -> Bool {
        var batch = confined.sources
        confined.sources = []
        lock.withLock {
            state.signalledSources.extract(into: &batch) { source in
                // Invalid, or not signalled any more (performed by another loop of the source, SPEC
                // R52): taken too, and skipped below, so that the last reference to an invalidated
                // source is not released under the lock (its deinit may call back into the loop).
                guard source.isValid && source.isSignalled else { return .take }
                return run.mode.sources[ObjectIdentifier(source)] != nil ? .take : .keep
            }
            // A nested run (from a callout of an outer pass) also performs the sources the outer
            // passes collected and have not performed yet, if they are still signalled and in this
            // mode, as CFRunLoop does; the outer pass then finds them performed (`consumeSignal`).
            confined.sourceBatches.forEach { outer in
                for source in outer
                where source.isValid && source.isSignalled && run.mode.sources[ObjectIdentifier(source)] != nil
                    && !batch.contains(where: { $0 === source })
                {
                    batch.append(source)
                }
            }
        }
        var handled = false
        if !batch.isEmpty {
            sortForPerforming(&batch)
            let records = isInstrumented  // once per batch (Instruments/LoopInstruments.swift)
            batch.withUnsafeBufferPointer { batch in
                confined.sourceBatches.push(batch)  // no retain: the batch is not changed meanwhile
                for index in batch.indices {
                    if handled && run.returnAfterSourceHandled {
                        // SPEC R47: the rest stay signalled for later passes or runs.
                        lock.withLock {
                            for source in batch[index...] where source.isSignalled {
                                queueSignalled(source)
                            }
                        }
                        break
                    }
                    let source = batch[index]
                    // SPEC R49: skipped if invalidated before its turn (merely removed: still performed).
                    guard source.isValid, source.consumeSignal() else { continue }
                    // The callout gate (Loop+Callouts.swift): `invalidate()` from another thread waits.
                    var recorded = false
                    let called = callout(of: source) {
                        recorded = records && instrumentCalloutBegins(.source, label: source.label)
                        source.performHandler()
                    }
                    guard called else { continue }
                    if recorded { instrumentCalloutEnded() }
                    handled = true
                    confined.timePassed()
                }
                confined.sourceBatches.pop()
            }
            batch.removeAll(keepingCapacity: true)
        }
        confined.sources = batch
        return handled
    }

    /// Insertion sort by (order, first-signal sequence): the batch is small and this never
    /// allocates.
    private func sortForPerforming(_ batch: inout [LoopSource]) {
        guard batch.count > 1 else { return }
        func key(_ source: LoopSource) -> (Int, UInt64) {
            (source.order, source.signalSequence.load(ordering: .relaxed))
        }
        for index in 1..<batch.count {
            let current = batch[index]
            let currentKey = key(current)
            var position = index
            while position > 0 && key(batch[position - 1]) > currentKey {
                batch[position] = batch[position - 1]
                position -= 1
            }
            batch[position] = current
        }
    }
}
