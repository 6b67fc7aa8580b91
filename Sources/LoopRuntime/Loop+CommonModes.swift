extension Loop {
    /// Adds `mode` to the loop's common set (SPEC R62).
    ///
    /// Every current common item — timers, sources, descriptor sources, ports and observers added
    /// to ``Mode/common`` — is added to `mode`, and sources get their `schedule` callback for it.
    /// There is no removal. Adding a mode that is already common does nothing.
    ///
    /// - Precondition: `mode` is a concrete mode, not ``Mode/common``.
    /// - Important: Safe from any thread; `schedule` callbacks run on the calling thread.
    public func addCommonMode(_ mode: Mode) {
        precondition(
            mode != .common,
            "Loop.addCommonMode(_:) was given .common on the \(self): the common set holds concrete modes.")
        let (scheduled, modeName): ([LoopSource], Mode) = change { change in
            guard !state.lifecycle.isEnded, state.commonModes.insert(mode).inserted else { return ([], mode) }
            let modeState = state.modeState(mode)
            modeState.markCommon()
            for timer in state.commonTimers.values {
                insert(timer, into: modeState)
            }
            for observer in state.commonObservers {
                insert(observer, into: modeState)
            }
            for source in state.commonDescriptorSources.values where !source.modes.contains(modeState) {
                source.modes.append(modeState)
                modeState.descriptorCount += 1
            }
            var scheduled: [LoopSource] = []
            let loopID = ObjectIdentifier(self)
            for source in state.commonSources.values
            where modeState.sources[ObjectIdentifier(source)] == nil {
                let stillValid = source.withRegistrations { registrations in
                    guard source.valid.load(ordering: .relaxed) else { return false }
                    registrations[loopID]?.modeCount += 1
                    return true
                }
                guard stillValid else { continue }
                modeState.sources[ObjectIdentifier(source)] = source
                scheduled.append(source)
            }
            change.movedTimers(in: modeState)
            // Blocks and executor jobs queued for `.common` can run in `mode` now: a loop running it
            // must look again (it may be asleep, and its executor queues' sleep flags were raised
            // for the modes it could run before).
            change.queued(.mode(modeState))
            return (scheduled, mode)
        }
        for source in scheduled {
            source.scheduleHandler?(self, modeName)
        }
    }
}
