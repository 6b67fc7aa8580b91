#if canImport(Glibc)
    import Glibc
#endif

extension Loop {
    /// Adds `source` to `mode` (every common mode for ``Mode/common``) and, the first time, starts
    /// watching its descriptor (SPEC R53).
    ///
    /// Adding it to a mode it is already in, or adding an invalid source, does nothing. A sleeping
    /// loop needs no wake-up: the descriptor is watched at once.
    ///
    /// - Throws: ``LoopSystemError`` from `epoll_ctl` when the descriptor cannot be watched: `EBADF`
    ///   for a closed or invalid descriptor, `EEXIST` when another descriptor source of this loop
    ///   already watches it, `EPERM` for a regular file. Nothing is added then.
    /// A loop that is shutting down or has ended refuses the source and invalidates it: it would
    /// never be performed there.
    ///
    /// - Precondition: `source` is not bound to another loop.
    /// - Important: Safe from any thread.
    public func add(_ source: LoopDescriptorSource, forMode mode: Mode) throws(LoopSystemError) {
        try addDescriptorSource(source, forMode: mode)
    }

    /// ``add(_:forMode:)``; returns false if the loop refused the source (shutting down or ended),
    /// which is then invalidated.
    @discardableResult
    func addDescriptorSource(_ source: LoopDescriptorSource, forMode mode: Mode) throws(LoopSystemError) -> Bool {
        // No wake needed: epoll reports the new descriptor's readiness to a sleeping loop itself.
        let result: Result<Bool, LoopSystemError> = change { _ in
            guard state.lifecycle.acceptsItems else { return .success(false) }
            guard bind(source) else { return .success(true) }
            if let endAware = source.endAwareReference {
                state.boundEndAwareItems[ObjectIdentifier(source)] = endAware
            }
            // SPEC R63: into every common mode it is missing from, also when it is a common item
            // already (and was removed from one of them, R64), as CFRunLoop does.
            let newlyCommon = mode == .common && state.commonItems.insert(.descriptorSource(source))
            let added = state.concreteModes(mode).filter { !source.modes.contains($0) }
            if source.token == 0 && !added.isEmpty {
                do throws(LoopSystemError) {
                    try watch(source)
                } catch {
                    if newlyCommon { state.commonItems.remove(source) }
                    return .failure(error)
                }
            }
            for modeState in added {
                source.modes.append(modeState)
                modeState.descriptorCount += 1
            }
            return .success(true)
        }
        if try result.get() { return true }
        source.invalidate()
        return false
    }

    /// Removes `source` from `mode`; when it leaves its last mode, the loop stops watching the
    /// descriptor. The source stays valid.
    ///
    /// - Important: Safe from any thread.
    public func remove(_ source: LoopDescriptorSource, forMode mode: Mode) {
        change { change in
            guard isBound(source) else { return }
            if mode == .common {
                guard state.commonItems.remove(source) else { return }
            }
            for modeState in state.concreteModes(mode) where source.modes.contains(modeState) {
                source.modes.remove(modeState)
                modeState.descriptorCount -= 1
            }
            if source.modes.isEmpty && source.token != 0 { unwatch(source) }
            change.removedItemsFromModes()  // SPEC M7: a sleeping run left empty returns at once
        }
    }

    /// True if `source` is in `mode` (for ``Mode/common``: recorded as a common item).
    ///
    /// - Important: Safe from any thread.
    public func contains(_ source: LoopDescriptorSource, forMode mode: Mode) -> Bool {
        lock.withLock {
            guard isBound(source) else { return false }
            if mode == .common {
                return state.commonItems.contains(source)
            }
            guard let modeState = state.modes[mode] else { return false }
            return source.modes.contains(modeState)
        }
    }

    // MARK: - Internals

    /// ``LoopDescriptorSource/setEvents(_:)`` for a source bound to this loop.
    func changeEvents(of source: LoopDescriptorSource, to events: LoopDescriptorSource.Events)
        throws(LoopSystemError)
    {
        let result: Result<Void, LoopSystemError> = lock.withLock {
            let previous = source.events
            guard events != previous else { return .success(()) }
            source.watchedEvents.store(events.rawValue, ordering: .releasing)
            // Readiness recorded but not performed yet, and no longer asked for, is dropped.
            source.pendingEvents.formIntersection(events.union([.error, .hangUp]))
            // Not registered (invalid, or in no mode) or paused: the next registration or resume
            // uses the new events.
            guard source.token != 0, source.isWatching else { return .success(()) }
            do throws(LoopSystemError) {
                try waiter.modify(source.descriptor, events: events.epollFlags, token: source.token)
                return .success(())
            } catch  where error.errno == EBADF || error.errno == ENOENT {
                closedWhileRegistered(source, "change the events of", error)
            } catch {
                source.watchedEvents.store(previous.rawValue, ordering: .releasing)
                return .failure(
                    LoopSystemError(
                        call: error.call, errno: error.errno,
                        detail:
                            "cannot change the events of descriptor \(source.descriptor) to [\(events)] on the \(self)"
                    ))
            }
        }
        try result.get()
    }

    /// Starts watching the source's descriptor. Lock held.
    private func watch(_ source: LoopDescriptorSource) throws(LoopSystemError) {
        let token = state.nextDescriptorToken
        do {
            try waiter.register(source.descriptor, events: source.events.epollFlags, token: token)
        } catch {
            let detail =
                error.errno == EEXIST
                ? "descriptor \(source.descriptor) is already watched by another LoopDescriptorSource of the \(self)"
                : "cannot watch descriptor \(source.descriptor) on the \(self)"
            throw LoopSystemError(call: error.call, errno: error.errno, detail: detail)
        }
        state.nextDescriptorToken += 1
        source.token = token
        source.isWatching = true
        state.descriptorSources[token] = source
    }

    /// Stops watching the source's descriptor. Lock held.
    private func unwatch(_ source: LoopDescriptorSource) {
        checkedControl(source, "remove") { () throws(LoopSystemError) in
            try waiter.deregister(source.descriptor, paused: !source.isWatching)
        }
        state.descriptorSources.removeValue(forKey: source.token)
        state.pausedDescriptorSources.removeAll { $0 === source }
        source.token = 0
        source.isWatching = false
        source.pendingEvents = []
    }

    /// Runs an epoll_ctl on a registered source's descriptor. `EBADF`/`ENOENT` mean the descriptor
    /// was closed while registered: a programmer error (SPEC R53), reported loudly.
    private func checkedControl(
        _ source: LoopDescriptorSource, _ action: String, _ body: () throws(LoopSystemError) -> Void
    ) {
        do {
            try body()
        } catch  where error.errno == EBADF || error.errno == ENOENT {
            closedWhileRegistered(source, action, error)
        } catch {
            fatalError("LoopDescriptorSource: \(action) descriptor \(source.descriptor) on the \(self): \(error)")
        }
    }

    /// SPEC R53's trap: the descriptor was closed while registered.
    private func closedWhileRegistered(_ source: LoopDescriptorSource, _ action: String, _ error: LoopSystemError)
        -> Never
    {
        preconditionFailure(
            "LoopDescriptorSource: descriptor \(source.descriptor) was closed while it was registered with the \(self) (found when trying to \(action) it: \(error)). Remove or invalidate the source before closing its descriptor (SPEC R53)."
        )
    }

    /// Adds a common descriptor source to a mode that just became common (SPEC R62). Lock held.
    func insert(_ source: LoopDescriptorSource, into modeState: ModeState) {
        guard !source.modes.contains(modeState) else { return }
        source.modes.append(modeState)
        modeState.descriptorCount += 1
    }

    /// Invalidation: leave every mode and stop watching.
    func removeInvalidated(_ source: LoopDescriptorSource) {
        change { change in
            for modeState in source.modes { modeState.descriptorCount -= 1 }
            source.modes.removeAll()
            state.commonItems.remove(source)
            state.boundEndAwareItems.removeValue(forKey: ObjectIdentifier(source))
            if source.token != 0 { unwatch(source) }
            change.removedItemsFromModes()  // SPEC M7
        }
    }

    /// Before a wait in `mode`: watch again the sources of `mode` that were paused (re-added to the
    /// epoll set; `EBADF` then means the descriptor was closed while registered). Lock held.
    func resumeWatching(in mode: ModeState) {
        guard !state.pausedDescriptorSources.isEmpty else { return }
        state.pausedDescriptorSources.removeAll { source in
            guard source.modes.contains(mode) else { return false }
            checkedControl(source, "watch") { () throws(LoopSystemError) in
                try waiter.resume(source.descriptor, events: source.events.epollFlags, token: source.token)
            }
            source.isWatching = true
            return true
        }
    }

    /// After a wait in `mode`: record the readiness of the sources of `mode`, and pause the ready
    /// sources of other modes so that they do not wake this run again. Returns true if a source
    /// of `mode` is ready. Lock held.
    func absorbReadiness(_ ready: [(token: UInt64, flags: UInt32)], in mode: ModeState) -> Bool {
        var relevant = false
        guard !ready.isEmpty else { return false }
        state.waitsWithReadiness &+= 1
        for (token, flags) in ready {
            guard let source = state.descriptorSources[token], source.isWatching else { continue }
            if source.modes.contains(mode) {
                // A wait that ended before a `setEvents` may report what the source no longer
                // asks for.
                let events = source.reportedEvents(epollFlags: flags)
                guard !events.isEmpty else { continue }
                if source.pendingEvents.isEmpty { confined.readyDescriptorSources.append(source) }
                source.pendingEvents.formUnion(events)
                relevant = true
                checkStillRegistered(source)
            } else {
                // Paused until a wait in one of its modes (how is the waiter's business).
                checkedControl(source, "pause") { () throws(LoopSystemError) in
                    try waiter.pause(source.descriptor)
                }
                source.isWatching = false
                state.pausedDescriptorSources.append(source)
            }
        }
        return relevant
    }

    /// SPEC R53: a descriptor closed while registered, while a duplicate (`dup`, a child process)
    /// keeps its file open, stays in the epoll set and is reported ready for ever — every read
    /// fails with `EBADF` and the loop would spin silently. A source reported ready in many waits
    /// in a row is therefore checked (one `epoll_ctl` per 256 reports in a row, nothing for a
    /// source that goes idle): `EBADF` (closed) or `ENOENT` (the number now names another file)
    /// trap with the R53 message. Lock held.
    private func checkStillRegistered(_ source: LoopDescriptorSource) {
        let wait = state.waitsWithReadiness
        source.readyStreak = source.lastReadyWait &+ 1 == wait ? source.readyStreak &+ 1 : 1
        source.lastReadyWait = wait
        guard source.readyStreak % 256 == 0 else { return }
        checkedControl(source, "check") { () throws(LoopSystemError) in
            try waiter.checkRegistration(source.descriptor, events: source.events.epollFlags, token: source.token)
        }
    }

    /// Step 10, second half: perform every ready descriptor source of the mode (SPEC R53, M3).
    /// Returns true if one was performed (SPEC R15).
    @inline(__always)
    func performReadyDescriptorSources(_ run: RunContext) -> Bool {
        !confined.readyDescriptorSources.isEmpty && performReadyDescriptorSourcesNow(run)
    }

    @inline(never)
    private func performReadyDescriptorSourcesNow(_ run: RunContext) -> Bool {
        var batch = confined.descriptors
        confined.descriptors = []
        var stale: [LoopDescriptorSource] = []
        lock.withLock {
            for source in confined.readyDescriptorSources {
                let events = source.pendingEvents
                source.pendingEvents = []
                // Readiness seen in another mode's run is stale by now; the source was paused and
                // will be watched again in its own mode. (Kept in `stale` until after unlocking: the
                // last reference to a removed source must not be released under the lock.)
                if source.modes.contains(run.mode) && !events.isEmpty {
                    batch.append((source, events))
                } else {
                    stale.append(source)
                }
            }
            confined.readyDescriptorSources.removeAll(keepingCapacity: true)
        }
        stale.removeAll()
        var handled = false
        if !batch.isEmpty {
            if batch.count > 1 { batch.sort { $0.0.order < $1.0.order } }
            let records = isInstrumented  // once per batch (Instruments/LoopInstruments.swift)
            for (source, collected) in batch {
                // What the source still asks for: an earlier handler of this batch, or another
                // thread, may have changed it (`setEvents`) since the readiness was collected.
                let events = collected.intersection(source.events.union([.error, .hangUp]))
                // The callout gate (Loop+Callouts.swift): `invalidate()` from another thread waits.
                guard !events.isEmpty else { continue }
                var recorded = false
                let called = callout(of: source) {
                    recorded = records && instrumentCalloutBegins(.descriptorSource, label: source.label)
                    source.handler(source, events)
                }
                guard called else { continue }
                if recorded { instrumentCalloutEnded() }
                confined.timePassed()
                handled = true
            }
            batch.removeAll(keepingCapacity: true)
        }
        confined.descriptors = batch
        return handled
    }
}
