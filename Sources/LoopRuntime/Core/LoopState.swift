import Synchronization

/// One run call in progress (possibly nested): what other threads may need to see of it.
struct RunCallRecord {
    /// Unowned: a loop never destroys a mode (its table keeps every mode it made for its life), so
    /// a run call costs no reference counting for its record.
    unowned(unsafe) let mode: ModeState
    /// `stop()` was called while this was the innermost run call (SPEC R66).
    var stopRequested = false
}

/// The loop's shared structure: what other threads may change or ask about. Every field is
/// guarded by the loop's lock; a few have an atomic mirror, written with the lock held, that the
/// loop thread reads without it to skip a step that has nothing to do (the pass takes the lock
/// only when a mirror says there may be work; see ThreadingModel.md, "State ownership"). What
/// only the loop thread touches is in `ThreadConfinedState`.
///
/// The lock (or, for the pass's scratch buffers, the loop thread) already guarantees exclusive
/// access, so the fields of the engine's bookkeeping objects opt out of Swift's dynamic
/// exclusivity checks (`@exclusivity(unchecked)`), which otherwise cost a thread-local lookup per
/// access on the hot path.
final class LoopState {
    /// Concrete modes, created on demand (SPEC R4).
    /// Never shrinks: a loop keeps every mode it made for its life, which is what lets run calls,
    /// the sleeping state and changes hold modes unretained (`RunCallRecord`, `innermostModeRef`).
    @exclusivity(unchecked) private(set) var modes: [Loop.Mode: ModeState] = [:]
    /// The common set (SPEC R62): starts as `{default}`, only grows.
    @exclusivity(unchecked) var commonModes: Set<Loop.Mode> = [.default]
    /// Items added to `.common` (SPEC R63), every kind in one table.
    @exclusivity(unchecked) var commonItems = CommonItems()

    /// Registered descriptor sources by epoll token (SPEC R53).
    @exclusivity(unchecked) var descriptorSources: [UInt64: LoopDescriptorSource] = [:]
    /// The next epoll token (0 and 1 are the waiter's eventfd and timerfd).
    @exclusivity(unchecked) var nextDescriptorToken: UInt64 = 2
    /// Descriptor sources not watched for now, because they became ready while the loop ran a mode
    /// they are not in; watched again before a wait in one of their modes.
    @exclusivity(unchecked) var pausedDescriptorSources: [LoopDescriptorSource] = []
    /// Waits that reported a ready descriptor, counted (see `checkStillRegistered`).
    @exclusivity(unchecked) var waitsWithReadiness = 0

    /// The executors' job queues (SPEC N1–N4). Each change bumps `jobQueuesVersion`, so the pass
    /// copies the list only when it changed.
    @exclusivity(unchecked) var jobQueues: [LoopJobQueue] = [] {
        didSet { jobQueuesVersion.add(1, ordering: .releasing) }
    }
    let jobQueuesVersion = Atomic<UInt64>(0)
    /// Called once when the loop stops accepting items (ends pending sleeps, ticks and activity
    /// streams; see Loop+Lifecycle.swift).
    @exclusivity(unchecked) var endHandlers: [UInt64: @Sendable () -> Void] = [:]
    /// The items bound to this loop that accept work of their own (ports), watched or not, by
    /// their descriptor source: a port removed from every mode still belongs to the lifecycle
    /// (Loop+Lifecycle.swift). Weak: the loop does not keep a port alive.
    @exclusivity(unchecked) var boundEndAwareItems: [ObjectIdentifier: EndAwareReference] = [:]
    /// Resumptions of async waiters under way, whose task will be enqueued on this loop (see
    /// `Loop.holdSeal(for:)`): the drain does not seal while there are any.
    @exclusivity(unchecked) var sealHolds = SealHolds()
    /// The last token `addEndHandler` gave out.
    @exclusivity(unchecked) var nextEndHandlerToken: UInt64 = 0
    /// The keep-alive object of the `LoopThread` that owns the loop, if any (weak: the `LoopThread`
    /// and the loop's executors hold it).
    @exclusivity(unchecked) var lifetimeHold = WeakObject()
    /// The main loop watches libdispatch's main-queue handle (see Loop+MainQueue.swift).
    @exclusivity(unchecked) var servesMainQueue = false
    /// The driver running the loop, if any.
    @exclusivity(unchecked) var driver: LoopDriver? = nil
    /// Objects attached by other modules (the shared executors), by mode list. Weak: an executor
    /// lives as long as something (a pinned actor) holds it, and keeps a `LoopThread` running.
    @exclusivity(unchecked) var attachments: [[Loop.Mode]: WeakObject] = [:]

    /// The FIFO of blocks not yet run (SPEC R57); mirrored by `mayHaveBlocks`. Changed only through
    /// `queue(_:)`, `takeBlocks(for:into:)` and `takeAllBlocks()`, which keep `blocksNamingModes`.
    @exclusivity(unchecked) private(set) var blocks: [QueuedBlock] = [] {
        didSet { blocksMirror.update(!blocks.isEmpty) }
    }
    /// How many of `blocks` name modes rather than just `.common`. At zero (the usual case) a block
    /// step takes the whole queue, or nothing, in O(1): the loop's lock is then held for a swap,
    /// not for a walk that copies every block, so that a thread queueing blocks by the million is
    /// not parked on the lock while the loop takes a batch.
    @exclusivity(unchecked) private var blocksNamingModes = 0
    /// Sources signalled since the loop last looked, possibly several times or already performed
    /// elsewhere; step 4 sorts them out (SPEC R46). Mirrored by `mayHaveSignalledSources`.
    @exclusivity(unchecked) var signalledSources: [LoopSource] = [] {
        didSet { signalledMirror.update(!signalledSources.isEmpty) }
    }
    private let blocksMirror = Atomic<Bool>(false)
    private let signalledMirror = Atomic<Bool>(false)

    /// Without the lock (loop thread): false only if no block is queued.
    var mayHaveBlocks: Bool { blocksMirror.load(ordering: .acquiring) }
    /// Without the lock (loop thread): false only if no source is waiting to be performed.
    var mayHaveSignalledSources: Bool { signalledMirror.load(ordering: .acquiring) }

    /// The run calls in progress, innermost last (SPEC R18). Stop requests are made and taken through
    /// `requestStop(at:)` and `takeStopRequest(at:)`, which keep `pendingStops` counting them.
    @exclusivity(unchecked) private(set) var runCalls: [RunCallRecord] = []
    /// How many run calls have a stop request not yet taken; the loop thread reads it without the lock.
    private let pendingStops = Atomic<Int>(0)

    /// Without the lock (loop thread): false only if no run call has a stop request.
    var mayHaveStopRequest: Bool { pendingStops.load(ordering: .acquiring) > 0 }

    /// The innermost run call's mode, unretained (a loop never destroys a mode): what every change from
    /// another thread looks at, read without touching the mode's reference count — a count the loop
    /// thread updates too, so that retaining it here would bounce its cache line at every change.
    /// Written only by `pushRunCall` and `popRunCall`, on the loop's thread, so that thread may read
    /// it without the lock (the other threads read it with the lock).
    @exclusivity(unchecked) private(set) var innermostModeRef: Unmanaged<ModeState>? = nil
    /// `runCalls.count`, with the same rule as `innermostModeRef`. (`runCalls` itself is not read
    /// without the lock: other threads write its elements' stop requests.)
    @exclusivity(unchecked) private(set) var runCallCount = 0

    func pushRunCall(_ mode: ModeState) -> Int {
        runCalls.append(RunCallRecord(mode: mode))
        // Unretained: the run call record just appended holds the mode until `popRunCall`.
        innermostModeRef = Unmanaged.passUnretained(mode)
        runCallCount = runCalls.count
        return runCalls.count - 1
    }

    func popRunCall() {
        if runCalls.removeLast().stopRequested { pendingStops.subtract(1, ordering: .releasing) }
        innermostModeRef = runCalls.last.map { Unmanaged.passUnretained($0.mode) }
        runCallCount = runCalls.count
    }

    /// Asks the run call at `depth` (0 for the outermost) to stop (SPEC R66).
    func requestStop(at depth: Int) {
        guard !runCalls[depth].stopRequested else { return }
        runCalls[depth].stopRequested = true
        pendingStops.add(1, ordering: .releasing)
    }

    /// True if the run call at `depth` was asked to stop; the request is consumed (SPEC R66).
    func takeStopRequest(at depth: Int) -> Bool {
        guard runCalls[depth].stopRequested else { return false }
        runCalls[depth].stopRequested = false
        pendingStops.subtract(1, ordering: .releasing)
        return true
    }

    /// True if the run call at `depth` was asked to stop (the request stays).
    func hasStopRequest(at depth: Int) -> Bool { runCalls[depth].stopRequested }
    /// `wakeUp()` was called while the loop was running: the next wait must not block (SPEC R68).
    @exclusivity(unchecked) var wakeUpPending = false

    /// While the loop is blocked in its wait: the mode it waits in and the run's deadline, so another
    /// thread that moves a timer of that mode can re-arm the wait (SPEC R41, M7).
    var sleepingMode: ModeState? {
        get { sleepingModeRef?.takeUnretainedValue() }
        set { sleepingModeRef = newValue.map { Unmanaged.passUnretained($0) } }
    }
    /// `sleepingMode`, unretained (a loop never destroys a mode), as `innermostModeRef`.
    @exclusivity(unchecked) private(set) var sleepingModeRef: Unmanaged<ModeState>? = nil
    /// The deadline of the run call blocked in the wait (see `sleepingMode`).
    @exclusivity(unchecked) var sleepingRunDeadline = LoopTime.distantFuture

    /// open → draining → ended → torn down (Loop+Lifecycle.swift): consulted by every entry point.
    @exclusivity(unchecked) var lifecycle = LoopLifecycle.open

    /// Timer-heap entries to release after unlocking, from every mode (see `TimerGraveyard`).
    let timerGraveyard = TimerGraveyard()

    /// Set (under the lock) whenever a mode's observers change; the loop's thread then drops its
    /// stale observer snapshots when a run call returns or it goes to sleep (`Loop.observersChanged`).
    let observersChanged = Atomic<Bool>(false)

    /// The next timer sequence number (ties between equal fire dates, SPEC R35).
    @exclusivity(unchecked) var nextTimerSequence: UInt64 = 0

    init() {
        modes.reserveCapacity(4)
        blocks.reserveCapacity(16)
        runCalls.reserveCapacity(4)
    }

    /// The state of `mode`, created on demand (SPEC R4). `mode` must not be `.common`.
    func modeState(_ mode: Loop.Mode) -> ModeState {
        if let existing = existingMode(mode) { return existing }
        let created = ModeState(mode: mode, graveyard: timerGraveyard)
        if commonModes.contains(mode) { created.markCommon() }
        modes[mode] = created
        return created
    }

    /// The concrete modes `mode` names: every common mode for `.common` (SPEC R63).
    func concreteModes(_ mode: Loop.Mode) -> [ModeState] {
        mode == .common ? commonModes.map(modeState) : [modeState(mode)]
    }

    /// True if a queued block may run in `mode` (SPEC R58, R60, M10).
    func hasBlocks(for mode: ModeState) -> Bool {
        guard !blocks.isEmpty else { return false }
        if blocksNamingModes == 0 { return mode.isCommon }
        return blocks.contains { $0.matches(mode) }
    }

    /// Queues `block` last (SPEC R57).
    @inline(__always)
    func queue(_ block: consuming QueuedBlock) {
        if !block.modes.isCommon { blocksNamingModes += 1 }
        blocks.append(block)
    }

    /// Moves the queued blocks that may run in `mode` to the end of `batch`, in order; the rest stay
    /// queued, in order (SPEC R58).
    func takeBlocks(for mode: ModeState, into batch: inout [QueuedBlock]) {
        guard !blocks.isEmpty else { return }
        if blocksNamingModes == 0 {
            // Every block is for `.common`: all of them run in a common mode, none elsewhere.
            guard mode.isCommon else { return }
            if batch.isEmpty {
                swap(&batch, &blocks)
            } else {
                batch.append(contentsOf: blocks)
                blocks.removeAll(keepingCapacity: true)
            }
            return
        }
        blocks.extract(into: &batch) { $0.matches(mode) ? .take : .keep }
        blocksNamingModes = blocks.reduce(0) { $0 + ($1.modes.isCommon ? 0 : 1) }
    }

    /// Empties the queue (the loop's teardown) and returns what it held.
    func takeAllBlocks() -> [QueuedBlock] {
        blocksNamingModes = 0
        defer { blocks = [] }
        return blocks
    }

    /// True if a valid, signalled source of `mode` is waiting to be performed.
    func hasSignalledSources(in mode: ModeState) -> Bool {
        signalledSources.contains {
            $0.isValid && $0.isSignalled && mode.sources[ObjectIdentifier($0)] != nil
        }
    }

    /// True if an executor with queued jobs may run in `mode` (SPEC N4). Takes the queues' locks.
    func hasJobs(for mode: ModeState) -> Bool {
        jobQueues.contains { !$0.isRunningBatch && $0.matches(mode) && $0.hasQueuedWork }
    }

    /// R10: nothing can ever wake `mode` (observers do not count, SPEC R30; queued executor jobs
    /// do, SPEC N4).
    func isEmpty(_ mode: ModeState) -> Bool {
        mode.hasNoSourcesOrTimers && !hasBlocks(for: mode) && !hasJobs(for: mode)
    }

    /// The mode most recently looked up by name, so that repeated run calls in one mode skip
    /// hashing its name.
    @exclusivity(unchecked) var lastLookedUp: ModeState?

    /// The state of an existing mode, or nil (SPEC R4: running a name nobody used).
    func existingMode(_ mode: Loop.Mode) -> ModeState? {
        if let last = lastLookedUp, last.mode == mode { return last }
        let found = modes[mode]
        if found != nil { lastLookedUp = found }
        return found
    }

    /// The innermost running mode, if the loop is running.
    var innermostMode: ModeState? { innermostModeRef?.takeUnretainedValue() }
}
