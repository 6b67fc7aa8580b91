import CLoopRuntimeShims
import Synchronization

// The loop's instruments: metrics (Loop+Metrics.swift), the timeline (Loop+Trace.swift) and stall
// reports (Loop+Stalls.swift), fed from one recorder on the loop's thread.
//
// Cost when off: every point of the pass that could record (a run call's entry and exit, a pass's
// start and end, a blocking wait, each callout) loads `Loop.instrumentFlags` once, relaxed, and
// branches over an out-of-line call. A point that opens a stretch (a run call, a pass, a callout)
// decides once whether to record it and its end follows that decision, so that instruments turned
// on or off meanwhile never unbalance the recorder's stacks. A run call the recorder never saw
// begin (instruments turned on inside it) is picked up at its next pass; records left behind by
// instruments turned off are dropped by depth when the next stretch at that depth opens.
//
// Time: the loop's own clock reading (`LoopThreadState.now`), which the pass reuses, so a pass
// with metrics on reads the clock about once more than without, and a callout once after it
// returns (the loop would read it next anyway). Virtual-time loops record virtual time.
//
// Busy time of a stretch: its length minus the time the loop spent blocked inside it (a callout
// that runs a nested run is not charged for the nested waits). That is what metrics record and
// stall thresholds compare; the timeline shows the plain length, so that its events nest.

/// One loop's instruments. One per loop, made with it; their storage is made when first turned on.
final class LoopInstruments: @unchecked Sendable {
    // Thread-safety: the two lazy references are atomic (made once, never replaced); `stallHandlers`
    // and `nextStallToken` are guarded by the loop's lock; `stallThreshold` is an atomic written
    // under that lock; everything under "Recorder" is touched only by the loop's thread.

    private let metricsReference = AtomicLazyReference<MetricsStorage>()
    private let traceReference = AtomicLazyReference<TraceRing>()

    /// The metrics storage, made the first time it is asked for.
    var metricsStorage: MetricsStorage {
        metricsReference.load() ?? metricsReference.storeIfNil(MetricsStorage())
    }
    var existingMetricsStorage: MetricsStorage? { metricsReference.load() }

    /// The trace ring, made the first time it is asked for.
    var traceRing: TraceRing {
        traceReference.load() ?? traceReference.storeIfNil(TraceRing())
    }
    var existingTraceRing: TraceRing? { traceReference.load() }

    // MARK: Stall handlers (loop's lock)

    struct StallHandler {
        let token: UInt64
        let threshold: Int64
        let handler: @Sendable (Loop.Stall) -> Void
    }
    @exclusivity(unchecked) private(set) var stallHandlers: [StallHandler] = []
    @exclusivity(unchecked) private var nextStallToken: UInt64 = 0
    /// The lowest threshold of `stallHandlers` (`Int64.max`: none).
    let stallThreshold = Atomic<Int64>(.max)

    /// Loop's lock held.
    func addStallHandler(_ threshold: Int64, _ handler: @escaping @Sendable (Loop.Stall) -> Void) -> UInt64 {
        nextStallToken += 1
        stallHandlers.append(StallHandler(token: nextStallToken, threshold: threshold, handler: handler))
        stallThreshold.store(min(stallThreshold.load(ordering: .relaxed), threshold), ordering: .relaxed)
        return nextStallToken
    }

    /// Loop's lock held. Returns the removed handler (to release after unlocking) and whether any
    /// is left.
    func removeStallHandler(_ token: UInt64) -> (StallHandler?, anyLeft: Bool) {
        guard let index = stallHandlers.firstIndex(where: { $0.token == token }) else {
            return (nil, !stallHandlers.isEmpty)
        }
        let removed = stallHandlers.remove(at: index)
        stallThreshold.store(stallHandlers.map(\.threshold).min() ?? .max, ordering: .relaxed)
        return (removed, !stallHandlers.isEmpty)
    }

    // MARK: Recorder (loop thread only)

    /// A run call being recorded, and its pass if one is open.
    struct OpenRun {
        let depth: Int
        let mode: Loop.Mode
        let start: Int64
        var passOpen = false
        var passStart: Int64 = 0
        var passWaited: Int64 = 0
        var passStalls = 0
        var longestBusy: Int64 = -1
        var longestKind: Loop.CalloutKind?
        var longestLabel: StaticString?
    }

    /// A callout being recorded.
    struct OpenCallout {
        let kind: Loop.CalloutKind
        let label: StaticString?
        let start: Int64
        let waited: Int64
        let stalls: Int
    }

    @exclusivity(unchecked) var runs: [OpenRun] = []
    @exclusivity(unchecked) var callouts: [OpenCallout] = []
    /// Total time blocked in waits since the recorder started (the busy time's correction).
    @exclusivity(unchecked) var waited: Int64 = 0
    /// Stalls reported so far: a stretch during which one was reported does not report itself.
    @exclusivity(unchecked) var stallsReported = 0
    /// Since when the loop has been busy (in a run call, not waiting); `nil` outside run calls.
    @exclusivity(unchecked) var busySince: Int64?
    /// The start of the job batch under way.
    @exclusivity(unchecked) var batchStarts: [Int64] = []
    /// The loop thread's kernel id, read at its first recording.
    @exclusivity(unchecked) var threadID: Int32 = 0
}

extension Loop {
    /// True if any instrument is on: the one relaxed load a recording point costs when all are off.
    @inline(__always)
    var isInstrumented: Bool { instrumentFlags.load(ordering: .relaxed) != 0 }

    // MARK: Run calls and passes

    @inline(never)
    func instrumentRunBegan(_ run: borrowing RunContext) {
        let recorder = instruments
        let now = loopThread.now(waiter)
        let depth = run.depth + 1  // counted from 1 for an outermost run call, as in `notification`
        recorder.trimRuns(below: depth)
        recorder.runs.append(.init(depth: depth, mode: run.mode.mode, start: now))
        if recorder.busySince == nil { recorder.busySince = now }
    }

    @inline(never)
    func instrumentRunEnded(_ run: borrowing RunContext) {
        let recorder = instruments
        let now = loopThread.now(waiter)
        let depth = run.depth + 1
        if let open = recorder.runs.last, open.depth == depth {
            recorder.runs.removeLast()
            record(.run(open.mode), label: nil, depth: depth, from: open.start, to: now)
        }
        if depth == 1, let since = recorder.busySince {
            addMetric(now - since, to: .busy)
            recorder.busySince = nil
        }
    }

    @inline(never)
    func instrumentPassBegan(_ run: borrowing RunContext) {
        let recorder = instruments
        let now = loopThread.now(waiter)
        let depth = run.depth + 1  // counted from 1 for an outermost run call, as in `notification`
        recorder.trimRuns(below: depth + 1)
        if recorder.runs.last?.depth != depth {  // turned on inside this run call
            recorder.trimRuns(below: depth)
            recorder.runs.append(.init(depth: depth, mode: run.mode.mode, start: now))
        }
        if recorder.busySince == nil { recorder.busySince = now }
        let last = recorder.runs.count - 1
        recorder.runs[last].passOpen = true
        recorder.runs[last].passStart = now
        recorder.runs[last].passWaited = recorder.waited
        recorder.runs[last].passStalls = recorder.stallsReported
        recorder.runs[last].longestBusy = -1
        recorder.runs[last].longestKind = nil
        recorder.runs[last].longestLabel = nil
        addMetric(1, to: .passes)
    }

    @inline(never)
    func instrumentPassEnded(_ run: borrowing RunContext) {
        let recorder = instruments
        let depth = run.depth + 1
        guard let open = recorder.runs.last, open.depth == depth, open.passOpen else { return }
        recorder.runs[recorder.runs.count - 1].passOpen = false
        let now = loopThread.now(waiter)
        record(.pass, label: nil, depth: depth, from: open.passStart, to: now)
        let busy = now - open.passStart - (recorder.waited - open.passWaited)
        if busy >= recorder.stallThreshold.load(ordering: .relaxed), recorder.stallsReported == open.passStalls {
            reportStall(
                .pass, busy: busy, culprit: open.longestKind, label: open.longestLabel, mode: open.mode,
                depth: depth, from: open.passStart, to: now)
        }
    }

    // MARK: Waits

    /// Before a blocking wait: the loop's clock reading, to hand to ``instrumentWaitEnded(since:cause:)``.
    @inline(never)
    func instrumentWaitBegan() -> Int64 {
        let now = loopThread.now(waiter)
        if let since = instruments.busySince { addMetric(now - since, to: .busy) }
        return now
    }

    /// After a blocking wait that began at `start` and ended for `cause`.
    @inline(never)
    func instrumentWaitEnded(since start: Int64, cause: MetricsStorage.WakeCause) {
        let recorder = instruments
        loopThread.timePassed()
        let now = loopThread.now(waiter)
        recorder.waited += now - start
        recorder.busySince = now
        addMetric(now - start, to: .waiting)
        addMetric(1, to: cause.slot)
        record(.wait(wokenBy: cause.name), label: nil, depth: state.runCallCount, from: start, to: now)
    }

    // MARK: Callouts

    /// Opens a callout's record: `true` if it did (then call ``instrumentCalloutEnded()`` after the
    /// callout). `lateness`: a timer's, from its fire date; `latency`: a job's, from its enqueue.
    @inline(__always)
    func instrumentCalloutBegins(
        _ kind: CalloutKind, label: @autoclosure () -> StaticString?, lateness: @autoclosure () -> Int64? = nil
    ) -> Bool {
        guard isInstrumented else { return false }
        instrumentCalloutBegan(kind, label: label(), delay: lateness())
        return true
    }

    @inline(never)
    func instrumentCalloutBegan(_ kind: CalloutKind, label: StaticString?, delay: Int64?) {
        let recorder = instruments
        let now = loopThread.now(waiter)
        recorder.callouts.append(
            .init(kind: kind, label: label, start: now, waited: recorder.waited, stalls: recorder.stallsReported))
        guard let delay, instrumentFlags.load(ordering: .relaxed) & InstrumentFlags.metrics != 0 else { return }
        let storage = recorder.metricsStorage
        (kind == .job ? storage.jobLatency : storage.timerLateness).record(delay)
    }

    /// Closes the record opened by ``instrumentCalloutBegins(_:label:lateness:)``. The callout's
    /// user code has run: the clock is read again.
    @inline(never)
    func instrumentCalloutEnded() {
        let recorder = instruments
        guard let open = recorder.callouts.popLast() else { return }
        loopThread.timePassed()
        let now = loopThread.now(waiter)
        let busy = now - open.start - (recorder.waited - open.waited)
        let depth = state.runCallCount
        if instrumentFlags.load(ordering: .relaxed) & InstrumentFlags.metrics != 0 {
            recorder.metricsStorage.callouts[open.kind.rawValue].record(busy)
        }
        record(.callout(open.kind), label: open.label, depth: depth, from: open.start, to: now)
        // The pass's longest callout, for a pass that stalls without one long callout.
        let last = recorder.runs.count - 1
        if last >= 0, recorder.runs[last].depth == depth, recorder.runs[last].passOpen,
            busy > recorder.runs[last].longestBusy
        {
            recorder.runs[last].longestBusy = busy
            recorder.runs[last].longestKind = open.kind
            recorder.runs[last].longestLabel = open.label
        }
        if busy >= recorder.stallThreshold.load(ordering: .relaxed), recorder.stallsReported == open.stalls {
            let mode = recorder.runs.last { $0.depth == depth }?.mode ?? currentMode ?? .default
            reportStall(
                .callout, busy: busy, culprit: open.kind, label: open.label, mode: mode, depth: depth,
                from: open.start, to: now)
        }
    }

    /// The start of an executor's batch (traced as one event holding its jobs).
    @inline(never)
    func instrumentBatchBegan() {
        instruments.batchStarts.append(loopThread.now(waiter))
    }

    @inline(never)
    func instrumentBatchEnded(jobs: Int, label: StaticString?) {
        guard let start = instruments.batchStarts.popLast() else { return }
        record(.jobBatch(jobs: jobs), label: label, depth: state.runCallCount, from: start, to: loopThread.now(waiter))
    }

    // MARK: Recording

    @inline(__always)
    private func addMetric(_ amount: Int64, to slot: MetricsStorage.Slot) {
        guard instrumentFlags.load(ordering: .relaxed) & InstrumentFlags.metrics != 0 else { return }
        instruments.metricsStorage.add(amount, to: slot)
    }

    private func record(_ kind: TraceEvent.Kind, label: StaticString?, depth: Int, from start: Int64, to end: Int64) {
        guard instrumentFlags.load(ordering: .relaxed) & InstrumentFlags.tracing != 0 else { return }
        let recorder = instruments
        if recorder.threadID == 0 { recorder.threadID = cloop_thread_id() }
        recorder.traceRing.record(
            TraceEvent(
                kind: kind, label: label, depth: depth, startNanoseconds: start,
                durationNanoseconds: max(end - start, 0)),
            threadID: recorder.threadID)
    }

    private func reportStall(
        _ scope: Stall.Scope, busy: Int64, culprit: CalloutKind?, label: StaticString?, mode: Mode, depth: Int,
        from start: Int64, to end: Int64
    ) {
        instruments.stallsReported += 1
        let stall = Stall(
            scope: scope, duration: .nanoseconds(busy), culprit: culprit, label: label, mode: mode, depth: depth,
            endNanoseconds: end)
        record(.stall(scope, culprit: culprit), label: label, depth: depth, from: start, to: end)
        let handlers = lock.withLock { instruments.stallHandlers }
        for handler in handlers where handler.threshold <= busy {
            handler.handler(stall)
        }
    }
}

extension LoopInstruments {
    /// Drops the records of run calls at `depth` or deeper: left behind when instruments were
    /// turned off before those runs ended.
    @inline(__always)
    func trimRuns(below depth: Int) {
        while let last = runs.last, last.depth >= depth { runs.removeLast() }
    }
}
