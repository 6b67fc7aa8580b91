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
// Time: the loop's own clock reading (`ThreadConfinedState.now`), which the pass reuses, so a pass
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
    /// Guarded by the loop's lock.
    @exclusivity(unchecked) private(set) var stallHandlers: [StallHandler] = []
    /// The last token given out; guarded by the loop's lock.
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

    /// A run call being recorded, and its pass if one is open. Plain data: its mode is unretained
    /// (a loop's modes live as long as the loop).
    struct OpenRun {
        let depth: Int
        let mode: Unmanaged<ModeState>
        let start: Int64
        var passOpen = false
        var passStart: Int64 = 0
        var passWaited: Int64 = 0
        var passOuterReported: Int64 = 0
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
        /// `innerReported` of the enclosing stretch, restored when this one ends.
        let outerReported: Int64
    }

    // The recorder: loop thread only, every field below.
    /// The run calls under way, innermost on top.
    @exclusivity(unchecked) var runs = RecorderStack<OpenRun>()
    /// The callouts under way, innermost on top.
    @exclusivity(unchecked) var callouts = RecorderStack<OpenCallout>()
    /// The starts of the job batches under way.
    @exclusivity(unchecked) var batchStarts = RecorderStack<Int64>()
    /// Total time blocked in waits since the recorder started (the busy time's correction).
    @exclusivity(unchecked) var waited: Int64 = 0
    /// The longest stall reported inside the innermost open stretch (0: none). A stretch reports
    /// itself only to the handlers whose threshold that inner report did not reach: each handler
    /// hears of the innermost stretch that crossed its own threshold.
    @exclusivity(unchecked) var innerReported: Int64 = 0
    /// Since when the loop has been busy (in a run call, not waiting); `nil` outside run calls.
    @exclusivity(unchecked) var busySince: Int64?
    /// Bumped (from any thread) each time an instrument is turned on while all were off: the loop
    /// thread did not follow the run calls meanwhile, so records and `busySince` from an older
    /// epoch are stale. `seenEpoch` is the loop thread's copy.
    let epoch = Atomic<UInt32>(0)
    /// The loop thread's copy of `epoch`.
    @exclusivity(unchecked) var seenEpoch: UInt32 = 0
    /// The loop thread's kernel id, read at its first recording.
    @exclusivity(unchecked) var threadID: Int32 = 0
    /// The storages, once made: used unretained (the lazy references keep them for the loop's life).
    @exclusivity(unchecked) private var metricsCache: Unmanaged<MetricsStorage>?
    /// The trace ring, unretained (as `metricsCache`).
    @exclusivity(unchecked) private var ringCache: Unmanaged<TraceRing>?

    /// The metrics storage, without reference counting. Loop thread only.
    @inline(__always)
    func withMetrics(_ body: (MetricsStorage) -> Void) {
        if metricsCache == nil { metricsCache = Unmanaged.passUnretained(metricsStorage) }
        metricsCache.unsafelyUnwrapped._withUnsafeGuaranteedRef(body)
    }

    /// The trace ring, without reference counting. Loop thread only.
    @inline(__always)
    func withRing(_ body: (TraceRing) -> Void) {
        if ringCache == nil { ringCache = Unmanaged.passUnretained(traceRing) }
        ringCache.unsafelyUnwrapped._withUnsafeGuaranteedRef(body)
    }

    deinit {
        runs.deallocate()
        callouts.deallocate()
        batchStarts.deallocate()
    }
}

/// A stack of values in a buffer of its own: pushes and pops without the uniqueness checks
/// of an array (the recorder pushes and pops several times a pass). Loop thread only.
struct RecorderStack<Element> {
    /// Allocated at the first push: a loop whose instruments never run allocates nothing.
    private var base = UnsafeMutablePointer<Element>(bitPattern: MemoryLayout<Element>.alignment)!
    private var capacity = 0
    private(set) var count = 0

    @inline(__always)
    mutating func push(_ element: Element) {
        if count == capacity { grow() }
        (base + count).initialize(to: element)
        count += 1
    }

    @inline(__always)
    mutating func pop() -> Element? {
        guard count > 0 else { return nil }
        count -= 1
        return (base + count).move()
    }

    /// The top element, to read or change in place; `nil` when empty.
    @inline(__always)
    var top: UnsafeMutablePointer<Element>? {
        count > 0 ? base + (count - 1) : nil
    }

    /// The topmost element matching `predicate`.
    func last(where predicate: (Element) -> Bool) -> Element? {
        var index = count - 1
        while index >= 0 {
            if predicate(base[index]) { return base[index] }
            index -= 1
        }
        return nil
    }

    private mutating func grow() {
        let larger = UnsafeMutablePointer<Element>.allocate(capacity: max(8, capacity * 2))
        larger.moveInitialize(from: base, count: count)
        if capacity > 0 { base.deallocate() }
        base = larger
        capacity = max(8, capacity * 2)
    }

    func deallocate() {
        base.deinitialize(count: count)
        if capacity > 0 { base.deallocate() }
    }
}

extension Loop {
    /// True if any instrument is on: the one relaxed load a recording point costs when all are off.
    @inline(__always)
    var isInstrumented: Bool { instrumentFlags.load(ordering: .relaxed) != 0 }

    @inline(__always)
    private var recordsMetrics: Bool { instrumentFlags.load(ordering: .relaxed) & InstrumentFlags.metrics != 0 }

    /// Turns an instrument on (any thread); a new epoch if all were off (see `LoopInstruments.epoch`).
    func turnOnInstrument(_ flag: UInt8) {
        if instrumentFlags.bitwiseOr(flag, ordering: .acquiringAndReleasing).oldValue == 0 {
            instruments.epoch.add(1, ordering: .releasing)
        }
    }

    /// Turns an instrument off (any thread).
    func turnOffInstrument(_ flag: UInt8) {
        instrumentFlags.bitwiseAnd(~flag, ordering: .releasing)
    }

    // MARK: Run calls and passes

    @inline(never)
    func instrumentRunBegan(_ run: borrowing RunContext) {
        let recorder = instruments
        let now = confined.now(waiter)
        recorder.catchUp()
        let depth = run.depth + 1  // counted from 1 for an outermost run call, as in `notification`
        recorder.trimRuns(below: depth)
        recorder.runs.push(
            .init(depth: depth, mode: Unmanaged.passUnretained(run.mode), start: now))
        if recorder.busySince == nil { recorder.busySince = now }
    }

    @inline(never)
    func instrumentRunEnded(_ run: borrowing RunContext) {
        let recorder = instruments
        // The last reading, not a new one: the run's last pass (or the exit observers' callouts)
        // took it just now, and the loop has done nothing since but notify the exit.
        let now = confined.lastReading
        let depth = run.depth + 1
        recorder.trimRuns(below: depth + 1)
        if let open = recorder.runs.top?.pointee, open.depth == depth {
            _ = recorder.runs.pop()
            record(.run, mode: open.mode, depth: depth, from: open.start, to: now)
        }
        if let since = recorder.busySince {
            if recordsMetrics { recorder.withMetrics { $0.add(now - since, to: .busy) } }
            recorder.busySince = depth == 1 ? nil : now
        }
    }

    @inline(never)
    func instrumentPassBegan(_ run: borrowing RunContext) {
        let recorder = instruments
        let now = confined.now(waiter)
        recorder.catchUp()
        let depth = run.depth + 1
        // Unretained: a loop's modes live as long as the loop (see the run record above).
        recorder.ensureRun(depth: depth, mode: Unmanaged.passUnretained(run.mode), since: now)
        if recorder.busySince == nil { recorder.busySince = now }
        let open = recorder.runs.top.unsafelyUnwrapped
        open.pointee.passOpen = true
        open.pointee.passStart = now
        open.pointee.passWaited = recorder.waited
        open.pointee.passOuterReported = recorder.innerReported
        open.pointee.longestBusy = -1
        open.pointee.longestKind = nil
        open.pointee.longestLabel = nil
        recorder.innerReported = 0
        if recordsMetrics { recorder.withMetrics { $0.add(1, to: .passes) } }
    }

    @inline(never)
    func instrumentPassEnded(_ run: borrowing RunContext) {
        let recorder = instruments
        let depth = run.depth + 1
        recorder.trimRuns(below: depth + 1)
        guard let top = recorder.runs.top, top.pointee.depth == depth, top.pointee.passOpen else { return }
        top.pointee.passOpen = false
        let open = top.pointee
        let now = confined.now(waiter)
        record(.pass, depth: depth, from: open.passStart, to: now)
        // Busy time so far, so that a loop that never blocks shows it too.
        if let since = recorder.busySince {
            if recordsMetrics { recorder.withMetrics { $0.add(now - since, to: .busy) } }
            recorder.busySince = now
        }
        let busy = now - open.passStart - (recorder.waited - open.passWaited)
        endStretch(
            .pass, busy: busy, outerReported: open.passOuterReported, culprit: open.longestKind,
            label: open.longestLabel, mode: open.mode, depth: depth, from: open.passStart, to: now)
    }

    // MARK: Waits

    /// Before a blocking wait: the loop's clock reading, to hand to ``instrumentWaitEnded(since:cause:)``.
    @inline(never)
    func instrumentWaitBegan() -> Int64 {
        let now = confined.now(waiter)
        instruments.catchUp()
        ensureRunRecord(since: now)
        if let since = instruments.busySince, recordsMetrics {
            instruments.withMetrics { $0.add(now - since, to: .busy) }
        }
        return now
    }

    /// After a blocking wait that began at `start` and ended for `cause`.
    @inline(never)
    func instrumentWaitEnded(since start: Int64, cause: MetricsStorage.WakeCause) {
        let recorder = instruments
        confined.timePassed()
        let now = confined.now(waiter)
        recorder.waited += now - start
        recorder.busySince = now
        if recordsMetrics {
            recorder.withMetrics { metrics in
                metrics.add(now - start, to: .waiting)
                metrics.add(1, to: cause.slot)
            }
        }
        let mode = recorder.runs.top?.pointee.mode
        record(.wait, detail: UInt8(cause.rawValue), mode: mode, depth: state.runCallCount, from: start, to: now)
    }

    // MARK: Callouts

    /// Opens a callout's record: `true` if it did (then call ``instrumentCalloutEnded()`` after the
    /// callout). `lateness`: a timer's, from its fire date, or a job's latency, from its enqueue.
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
        let now = confined.now(waiter)
        ensureRunRecord(since: now)
        recorder.callouts.push(
            .init(kind: kind, label: label, start: now, waited: recorder.waited, outerReported: recorder.innerReported))
        recorder.innerReported = 0
        guard let delay, recordsMetrics else { return }
        recorder.withMetrics { metrics in
            (kind == .job ? metrics.jobLatency : metrics.timerLateness).record(delay)
        }
    }

    /// Closes the record opened by ``instrumentCalloutBegins(_:label:lateness:)``. The callout's
    /// user code has run: the clock is read again.
    @inline(never)
    func instrumentCalloutEnded() {
        let recorder = instruments
        guard let open = recorder.callouts.pop() else { return }
        confined.timePassed()
        let now = confined.now(waiter)
        let busy = now - open.start - (recorder.waited - open.waited)
        let depth = state.runCallCount
        if recordsMetrics { recorder.withMetrics { $0.callouts[open.kind.rawValue].record(busy) } }
        record(.callout, detail: UInt8(open.kind.rawValue), label: open.label, depth: depth, from: open.start, to: now)
        // The pass's longest callout, for a pass that stalls without one long callout.
        if let top = recorder.runs.top, top.pointee.depth == depth, top.pointee.passOpen,
            busy > top.pointee.longestBusy
        {
            top.pointee.longestBusy = busy
            top.pointee.longestKind = open.kind
            top.pointee.longestLabel = open.label
        }
        let mode = recorder.runs.last { $0.depth == depth }?.mode ?? state.innermostModeRef
        endStretch(
            .callout, busy: busy, outerReported: open.outerReported, culprit: open.kind, label: open.label,
            mode: mode, depth: depth, from: open.start, to: now)
    }

    /// The start of an executor's batch (traced as one event holding its jobs). The clock is read
    /// afresh: a job enqueued after the loop's last reading would otherwise show a negative
    /// latency. (Other batches are collected right after a reading, and their first callout is
    /// charged with that little work, except a big timer batch, which reads it too.)
    @inline(never)
    func instrumentJobBatchBegan() {
        confined.timePassed()
        let now = confined.now(waiter)
        ensureRunRecord(since: now)
        instruments.batchStarts.push(now)
    }

    @inline(never)
    func instrumentJobBatchEnded(jobs: Int, label: StaticString?) {
        guard let start = instruments.batchStarts.pop() else { return }
        record(
            .jobBatch, label: label, count: jobs, depth: state.runCallCount, from: start,
            to: confined.lastReading)
    }

    /// Opens the record of the innermost run call if the recorder has not seen it begin.
    @inline(__always)
    private func ensureRunRecord(since now: Int64) {
        guard let mode = state.innermostModeRef else { return }
        instruments.ensureRun(depth: state.runCallCount, mode: mode, since: now)
    }

    // MARK: Recording

    private func record(
        _ kind: RawTraceEvent.Kind, detail: UInt8 = 0, culprit: UInt8 = RawTraceEvent.none,
        label: StaticString? = nil, count: Int = 0, mode: Unmanaged<ModeState>? = nil, depth: Int,
        from start: Int64, to end: Int64
    ) {
        guard instrumentFlags.load(ordering: .relaxed) & InstrumentFlags.tracing != 0 else { return }
        let recorder = instruments
        if recorder.threadID == 0 { recorder.threadID = cloop_thread_id() }
        let event = RawTraceEvent(
            kind: kind, detail: detail, culprit: culprit, depth: Int32(clamping: depth), count: Int32(clamping: count),
            start: start, duration: max(end - start, 0), label: label, mode: mode)
        let threadID = recorder.threadID
        recorder.withRing { $0.record(event, threadID: threadID) }
    }

    /// The end of a callout or pass that was busy for `busy`: reports it as a stall to each handler
    /// whose threshold it reached and no stall reported inside it did, then hands the longest stall
    /// reported within it to the enclosing stretch.
    @inline(__always)
    private func endStretch(
        _ scope: Stall.Scope, busy: Int64, outerReported: Int64, culprit: CalloutKind?, label: StaticString?,
        mode: Unmanaged<ModeState>?, depth: Int, from start: Int64, to end: Int64
    ) {
        let recorder = instruments
        let inner = recorder.innerReported
        var reported = inner
        if busy >= recorder.stallThreshold.load(ordering: .relaxed) {
            if reportStall(
                scope, busy: busy, above: inner, culprit: culprit, label: label, mode: mode, depth: depth,
                from: start, to: end)
            {
                reported = busy
            }
        }
        recorder.innerReported = max(outerReported, reported)
    }

    /// Reports a stall to the handlers with a threshold in `above < threshold <= busy`; true if any.
    @inline(never)
    private func reportStall(
        _ scope: Stall.Scope, busy: Int64, above inner: Int64, culprit: CalloutKind?, label: StaticString?,
        mode: Unmanaged<ModeState>?, depth: Int, from start: Int64, to end: Int64
    ) -> Bool {
        let handlers = lock.withLock { instruments.stallHandlers }
        let due = handlers.filter { $0.threshold <= busy && $0.threshold > inner }
        guard !due.isEmpty else { return false }
        record(
            .stall, detail: scope == .callout ? 0 : 1,
            culprit: culprit.map { UInt8($0.rawValue) } ?? RawTraceEvent.none,
            label: label, mode: mode, depth: depth, from: start, to: end)
        let stall = Stall(
            scope: scope, duration: .nanoseconds(busy), culprit: culprit, label: label,
            mode: mode?._withUnsafeGuaranteedRef { $0.mode } ?? .default, depth: depth, endNanoseconds: end)
        for handler in due { handler.handler(stall) }
        return true
    }
}

extension LoopInstruments {
    /// At the start of a run call, a pass or a wait (the points that use what it forgets): if
    /// instruments were all off since the loop thread last looked, forget what it kept from then (records of run calls it did not see end, the busy
    /// mark, stall bookkeeping). Callout and batch records are not touched: their own begin/end
    /// pairs keep them balanced.
    @inline(__always)
    func catchUp() {
        let current = epoch.load(ordering: .acquiring)
        guard current != seenEpoch else { return }
        seenEpoch = current
        while runs.pop() != nil {}
        busySince = nil
        innerReported = 0
    }

    /// Makes the record of the run call at `depth` the top one: drops deeper ones (left behind),
    /// and opens it if instruments were turned on inside that run call (from `now`: what came
    /// before was not recorded).
    @inline(__always)
    func ensureRun(depth: Int, mode: Unmanaged<ModeState>, since now: Int64) {
        trimRuns(below: depth + 1)
        guard runs.top?.pointee.depth != depth else { return }
        trimRuns(below: depth)
        runs.push(.init(depth: depth, mode: mode, start: now))
    }

    /// Drops the records of run calls at `depth` or deeper.
    @inline(__always)
    func trimRuns(below depth: Int) {
        while let top = runs.top, top.pointee.depth >= depth { _ = runs.pop() }
    }
}
