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
            var scheduled: [LoopSource] = []
            for item in state.commonItems.inOrder {
                switch item {
                case .timer(let timer): insert(timer, into: modeState)
                case .observer(let observer): insert(observer, into: modeState)
                case .descriptorSource(let source): insert(source, into: modeState)
                case .source(let source): if insert(source, into: modeState) { scheduled.append(source) }
                }
            }
            change.movedTimers(in: modeState)
            // Blocks and executor jobs queued for `.common` can run in `mode` now: a loop running it
            // must look again (it may be asleep, and its executor queues' sleep flags were raised
            // for the modes it could run before).
            change.madeCommon(modeState)
            return (scheduled, mode)
        }
        for source in scheduled {
            source.scheduleHandler?(self, modeName)
        }
    }
}
