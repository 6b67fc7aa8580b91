// Teardown: the last step of a loop's life (SPEC R5). It detaches every item, drops the queued
// blocks and closes the loop's descriptors, on the loop's own thread, once.

extension Loop {
    /// The handlers registered with `addEndHandler`, taken out so each runs once. Lock held.
    func takeEndHandlers() -> [@Sendable () -> Void] {
        defer { state.endHandlers.removeAll() }
        return state.endHandlers.sorted { $0.key < $1.key }.map(\.value)
    }

    /// Thread-exit teardown (SPEC R5), and the last step of a `LoopThread`'s shutdown: ends the loop
    /// if it has not ended, resumes the async waiters still registered, detaches every item
    /// (sources get their cancel callback once per mode and stay valid; descriptor sources stop
    /// being watched), drops queued blocks, closes the loop's own descriptors. Runs once; called on
    /// the loop's thread (by `LoopThread`, or by the registry's pthread key destructor).
    func tearDown() {
        let taken: (TakenItems, [@Sendable () -> Void])? = lock.withLock {
            guard !state.lifecycle.isTornDown else { return nil }
            if !state.lifecycle.isEnded {
                preconditionNoJobsQueuedLocked("its thread exited")
                sealLocked()
            }
            let handlers = takeEndHandlers()
            return (takeAllItems(), handlers)
        }
        guard var (detached, handlers) = taken else { return }
        for (source, mode) in detached.cancels {
            source.cancelHandler?(self, mode)
        }
        for handler in handlers { handler() }
        handlers.removeAll()
        detached.release()
        waiter.close()
    }

    /// Empties every mode and marks the loop torn down. Lock held; nothing is running (teardown
    /// happens when the thread exits, deinit when nothing refers to the loop), so every timer is in
    /// its modes' heaps. Everything whose last release could run user code (closures, sources,
    /// observers, timers, executors) is moved into the result, to be released after unlocking.
    func takeAllItems() -> TakenItems {
        state.lifecycle = .tornDown(state.lifecycle.reason ?? .threadExited)
        var detached = TakenItems()
        for modeState in state.modes.values {
            for source in modeState.sources.values {
                detached.cancels.append((source, modeState.mode))
            }
            for entry in modeState.timerHeap.entries {
                entry.timer.modes.removeAll()
            }
            for observer in modeState.observers {
                observer.memberships.removeAll()
            }
            detached.objects.append(contentsOf: modeState.observers as [AnyObject])
            detached.objects.append(contentsOf: modeState.observerSnapshot as [AnyObject])
            modeState.observerSnapshot = []
            detached.timerEntries.append(contentsOf: modeState.timerHeap.removeAll())
            modeState.sources.removeAll()
            modeState.timerCount = 0
            modeState.observers.removeAll()
            modeState.recomputeObserverActivities()
        }
        // Descriptor sources: the epoll instance is about to close, which drops its registrations.
        detached.descriptorSources = Array(state.descriptorSources.values)
        for source in detached.descriptorSources {
            source.modes.removeAll()
            source.token = 0
            source.isWatching = false
            source.pendingEvents = []
        }
        for modeState in state.modes.values { modeState.descriptorCount = 0 }
        state.descriptorSources.removeAll()
        state.pausedDescriptorSources.removeAll()
        confined.readyDescriptorSources.removeAll()
        let id = ObjectIdentifier(self)
        for (source, _) in detached.cancels {
            source.withRegistrations { _ = $0.removeValue(forKey: id) }
        }
        detached.objects.append(contentsOf: state.commonItems.removeAll())
        detached.objects.append(contentsOf: state.signalledSources as [AnyObject])
        detached.blocks = state.takeAllBlocks()
        state.signalledSources.removeAll()
        let end = endNoticeLocked()
        for queue in state.jobQueues { queue.loopEnded(end) }
        detached.objects.append(contentsOf: state.jobQueues as [AnyObject])
        state.jobQueues.removeAll()
        state.boundEndAwareItems.removeAll()  // told the loop ended by the seal (tearDown seals first)
        detached.objects.append(contentsOf: confined.jobQueues as [AnyObject])
        confined.jobQueues.removeAll()
        state.attachments.removeAll()
        if let driver = state.driver { detached.objects.append(driver) }
        state.driver = nil
        detached.objects.append(contentsOf: state.endHandlers.values.map { $0 as AnyObject })
        state.endHandlers.removeAll()
        return detached
    }
}

/// What `detachEverything` took off a torn-down loop: callbacks to make, and objects and closures
/// to release — all after the loop's lock is released, because they may run user code.
struct TakenItems {
    var cancels: [(LoopSource, Loop.Mode)] = []
    var descriptorSources: [LoopDescriptorSource] = []
    var timerEntries: [TimerHeap.Entry] = []
    var blocks: [QueuedBlock] = []  // dropped unrun (SPEC R5)
    var objects: [AnyObject] = []

    /// Gives back the timer entries' retains and drops everything else. Lock not held.
    mutating func release() {
        for entry in timerEntries { TimerHeap.release(entry) }
        self = TakenItems()
    }
}
