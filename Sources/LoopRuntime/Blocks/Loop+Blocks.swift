extension Loop {
    /// Queues `block` to run on the loop's thread in one of `modes` (SPEC R57).
    ///
    /// The block runs at the next block step (SPEC R19 steps 3, 5, 11) of a pass whose mode is one
    /// of `modes` — ``Mode/common`` meaning whichever common mode is running; blocks that do not
    /// match stay queued, in order (SPEC R58). Blocks queued while blocks run wait for the next
    /// block step (SPEC R59). A queued block keeps its modes alive, and running it does not count as
    /// handling a source (SPEC R60). From another thread, a loop sleeping in a matching mode is woken
    /// (SPEC M2), and a pass never sleeps while a matching block is queued (SPEC M10).
    ///
    /// - Parameters:
    ///   - modes: The modes the block may run in; must not be empty. Defaults to ``Mode/common``.
    ///   - label: The name of the block's callout in stall reports and traces (a static string; a
    ///     labelled block costs one small allocation more when queued). Defaults to none.
    ///   - block: The work.
    /// - Returns: `false` if the loop has ended — its thread exited, or its `LoopThread` finished
    ///   shutting down — and no longer accepts work: the block was not queued and will never run.
    ///   `true` otherwise; a block accepted while a `LoopThread` shuts down runs in its drain.
    /// - Important: Safe from any thread.
    @discardableResult
    public func perform(
        inModes modes: [Mode] = [.common],
        label: StaticString? = nil,
        _ block: @escaping @Sendable () -> Void
    ) -> Bool {
        preconditionSomeMode(modes, in: "Loop.perform(inModes:label:_:)", of: "the \(self)")
        return enqueue(QueuedBlock(modes: BlockModes(modes, label: label), body: block), naming: modes)
    }

    /// Queues `block` to run on the loop's thread in whichever common mode is running: the same as
    /// ``perform(inModes:label:_:)`` with `[.common]`, without building a mode list.
    ///
    /// - Returns: `false` if the loop has ended (the block was not queued and will never run).
    /// - Important: Safe from any thread.
    @discardableResult
    public func perform(_ block: consuming @escaping @Sendable () -> Void) -> Bool {
        enqueue(QueuedBlock(modes: .common, body: block), naming: [])
    }

    /// ``perform(inModes:label:_:)`` with modes and a label prepared once (``PreparedBlockModes``):
    /// no allocation per block for the label. Support for the `LoopExecutor` module, whose own
    /// blocks (a parked task's wake-up, a submitted body) carry names in traces and stall reports.
    ///
    /// - Important: Safe from any thread.
    @discardableResult
    package func perform(_ prepared: PreparedBlockModes, _ block: @escaping @Sendable () -> Void) -> Bool {
        enqueue(QueuedBlock(modes: prepared.modes, body: block), naming: prepared.names)
    }

    /// ``perform(inModes:label:_:)``, refused (`false`) as soon as a shutdown has begun rather than when
    /// the loop has ended: for `LoopThread`, which refuses new work while it drains.
    func performIfOpen(
        inModes modes: [Mode], label: StaticString? = nil, _ block: @escaping @Sendable () -> Void
    ) -> Bool {
        enqueue(QueuedBlock(modes: BlockModes(modes, label: label), body: block), naming: modes, onlyIfOpen: true)
    }

    /// ``perform(_:)`` with the refusal of ``performIfOpen(inModes:_:)``.
    func performIfOpen(_ block: consuming @escaping @Sendable () -> Void) -> Bool {
        enqueue(QueuedBlock(modes: .common, body: block), naming: [], onlyIfOpen: true)
    }

    private func enqueue(_ queued: consuming QueuedBlock, naming modes: [Mode], onlyIfOpen: Bool = false) -> Bool {
        // Moved into the queue, not copied: a block costs no reference counting on the way in.
        var pending = Optional(queued)
        return change { change in
            guard onlyIfOpen ? state.lifecycle.acceptsItems : state.lifecycle.acceptsWork else {
                return false
            }
            for mode in modes where mode != .common {
                _ = state.modeState(mode)  // SPEC R4: a block naming a mode creates it.
            }
            // Wakes the loop only if it is running a mode the block can run in; a run of another
            // mode finds the block when it starts (SPEC R10, R58).
            let block = pending.take()!
            change.queuedBlock(for: block.modes)
            state.queue(block)
            return true
        }
    }

    /// A block step (SPEC R19 steps 3, 5, 11): runs, in FIFO order, the queued blocks that match
    /// the running mode. Blocks queued meanwhile wait for the next step (SPEC R59).
    @inline(__always)
    func runBlocks(_ run: RunContext) {
        if state.mayHaveBlocks { runQueuedBlocks(run) }  // no lock, no call when nothing is queued
    }

    @inline(never)
    private func runQueuedBlocks(_ run: RunContext) {
        var batch = confined.blocks
        confined.blocks = []
        // Matching blocks move to `batch`; the rest stay queued, in order (SPEC R58).
        lock.withLock { state.takeBlocks(for: run.mode, into: &batch) }
        let records = isInstrumented  // once per block step (Instruments/LoopInstruments.swift)
        for block in batch {
            let recorded = records && instrumentCalloutBegins(.block, label: block.modes.label)
            block.body()
            if recorded { instrumentCalloutEnded() }
        }
        if !batch.isEmpty { confined.timePassed() }
        batch.removeAll(keepingCapacity: true)
        confined.blocks = batch
    }

    /// Runs `block` once, `delay` from now on the loop's clock (`now`), on the loop's thread in one of
    /// `modes` (SPEC R75).
    ///
    /// This is a one-shot ``LoopTimer`` in `modes`: it fires at the first pass of one of those modes
    /// at or after the date — a delay of zero still waits for the loop to run one of them. The
    /// returned timer is the handle: ``LoopTimer/invalidate()`` cancels the perform if it has not
    /// run yet.
    ///
    /// - Parameters:
    ///   - delay: How long to wait at least.
    ///   - modes: The modes the block may run in; must not be empty. Defaults to ``Mode/default``.
    ///   - label: The name of the block's callout in stall reports and traces (the timer's label).
    ///     Defaults to none.
    ///   - block: The work.
    /// - Returns: The timer that will run the block.
    /// - Important: Safe from any thread.
    @discardableResult
    public func perform(
        after delay: Duration,
        inModes modes: [Mode] = [.default],
        label: StaticString? = nil,
        _ block: @escaping @Sendable () -> Void
    ) -> LoopTimer {
        preconditionSomeMode(
            modes, in: "Loop.perform(after:inModes:label:_:)", of: "the \(self)", defaults: "[.default]")
        let timer = LoopTimer(
            fireAt: LoopTime.instant(LoopTime.adding(LoopTime.nanoseconds(of: delay), to: waiter.now())),
            label: label
        ) { _ in
            block()
        }
        for mode in modes { add(timer, forMode: mode) }
        return timer
    }
}

/// Modes and a label for blocks, made once and shared by every block queued with them (see
/// `Loop.perform(_:_:)`). Support for the `LoopExecutor` module.
///
/// - Important: Immutable; safe from any thread.
package struct PreparedBlockModes: Sendable {
    let modes: BlockModes
    let names: [Loop.Mode]

    /// Blocks in `modes` (not empty), named `label` in traces and stall reports.
    package init(_ modes: [Loop.Mode], label: StaticString) {
        precondition(!modes.isEmpty, "PreparedBlockModes: the mode list is empty, so its blocks could never run.")
        self.modes = BlockModes(modes, label: label)
        names = modes
    }
}
