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
    /// - Precondition: `source` is not bound to another loop.
    /// - Important: Safe from any thread.
    public func add(_ source: LoopDescriptorSource, forMode mode: Mode) throws(LoopSystemError) {
        let result: Result<Void, LoopSystemError> = lock.withLock {
            guard !state.isTornDown, bind(source) else { return .success(()) }
            let id = ObjectIdentifier(source)
            if mode == .common {
                guard state.commonDescriptorSources.updateValue(source, forKey: id) == nil else {
                    return .success(())
                }
            }
            let added = state.concreteModes(mode).filter { !source.modes.contains($0) }
            if source.token == 0 && !added.isEmpty {
                do throws(LoopSystemError) {
                    try register(source)
                } catch {
                    if mode == .common { state.commonDescriptorSources.removeValue(forKey: id) }
                    return .failure(error)
                }
            }
            if mode == .common { source.isCommonItem = true }
            for modeState in added {
                source.modes.append(modeState)
                modeState.descriptorCount += 1
            }
            return .success(())
        }
        try result.get()
    }

    /// Removes `source` from `mode`; when it leaves its last mode, the loop stops watching the
    /// descriptor. The source stays valid.
    ///
    /// - Important: Safe from any thread.
    public func remove(_ source: LoopDescriptorSource, forMode mode: Mode) {
        lock.withLock {
            guard isBound(source) else { return }
            if mode == .common {
                guard state.commonDescriptorSources.removeValue(forKey: ObjectIdentifier(source)) != nil
                else { return }
                source.isCommonItem = false
            }
            for modeState in state.concreteModes(mode) where source.modes.contains(modeState) {
                source.modes.remove(modeState)
                modeState.descriptorCount -= 1
            }
            if source.modes.isEmpty && source.token != 0 { deregister(source) }
        }
    }

    /// True if `source` is in `mode` (for ``Mode/common``: recorded as a common item).
    ///
    /// - Important: Safe from any thread.
    public func contains(_ source: LoopDescriptorSource, inMode mode: Mode) -> Bool {
        lock.withLock {
            guard isBound(source) else { return false }
            if mode == .common {
                return state.commonDescriptorSources[ObjectIdentifier(source)] != nil
            }
            guard let modeState = state.modes[mode] else { return false }
            return source.modes.contains(modeState)
        }
    }

    // MARK: - Internals

    /// Starts watching the source's descriptor. Lock held.
    private func register(_ source: LoopDescriptorSource) throws(LoopSystemError) {
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
    private func deregister(_ source: LoopDescriptorSource) {
        if source.isWatching {  // a paused source is not in the epoll set any more
            checkedControl(source, "remove") { () throws(LoopSystemError) in
                try waiter.deregister(source.descriptor)
            }
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
            preconditionFailure(
                "LoopDescriptorSource: descriptor \(source.descriptor) was closed while it was registered with the \(self) (found when trying to \(action) it: \(error)). Remove or invalidate the source before closing its descriptor (SPEC R53)."
            )
        } catch {
            fatalError("LoopDescriptorSource: \(action) descriptor \(source.descriptor) on the \(self): \(error)")
        }
    }

    /// Invalidation: leave every mode and stop watching.
    func detach(_ source: LoopDescriptorSource) {
        lock.withLock {
            for modeState in source.modes { modeState.descriptorCount -= 1 }
            source.modes.removeAll()
            if source.isCommonItem {
                source.isCommonItem = false
                state.commonDescriptorSources.removeValue(forKey: ObjectIdentifier(source))
            }
            if source.token != 0 { deregister(source) }
        }
    }

    /// Before a wait in `mode`: watch again the sources of `mode` that were paused (re-added to the
    /// epoll set; `EBADF` then means the descriptor was closed while registered). Lock held.
    func resumeWatching(in mode: ModeState) {
        guard !state.pausedDescriptorSources.isEmpty else { return }
        state.pausedDescriptorSources.removeAll { source in
            guard source.modes.contains(mode) else { return false }
            checkedControl(source, "watch") { () throws(LoopSystemError) in
                try waiter.register(source.descriptor, events: source.events.epollFlags, token: source.token)
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
        for (token, flags) in ready {
            guard let source = state.descriptorSources[token], source.isWatching else { continue }
            if source.modes.contains(mode) {
                if source.pendingEvents.isEmpty { state.readyDescriptorSources.append(source) }
                source.pendingEvents.formUnion(LoopDescriptorSource.Events(epollFlags: flags))
                relevant = true
            } else {
                // Paused by leaving the epoll set: a registration with no events would still report
                // EPOLLHUP/EPOLLERR (the kernel always adds them) and make the wait spin.
                checkedControl(source, "pause") { () throws(LoopSystemError) in
                    try waiter.deregister(source.descriptor)
                }
                source.isWatching = false
                state.pausedDescriptorSources.append(source)
            }
        }
        return relevant
    }

    /// Step 10, second half: perform every ready descriptor source of the mode (SPEC R53, M3).
    /// Returns true if one was performed (SPEC R15).
    func performReadyDescriptorSources(_ run: RunContext) -> Bool {
        var batch = scratch.descriptors
        scratch.descriptors = []
        lock.withLock {
            guard !state.readyDescriptorSources.isEmpty else { return }
            for source in state.readyDescriptorSources {
                let events = source.pendingEvents
                source.pendingEvents = []
                // Readiness seen in another mode's run is stale by now; the source was paused and
                // will be watched again in its own mode.
                if source.modes.contains(run.mode) && !events.isEmpty { batch.append((source, events)) }
            }
            state.readyDescriptorSources.removeAll(keepingCapacity: true)
        }
        var handled = false
        if !batch.isEmpty {
            if batch.count > 1 { batch.sort { $0.0.order < $1.0.order } }
            for (source, events) in batch where source.isValid {
                source.handler(source, events)
                handled = true
            }
            batch.removeAll(keepingCapacity: true)
        }
        scratch.descriptors = batch
        return handled
    }
}
