/// The modes a queued block may run in (SPEC R57): `.common` (the usual case, stored without an
/// array), one mode, or several.
enum BlockModes {
    case common
    case one(Loop.Mode)
    case several([Loop.Mode])

    init(_ modes: [Loop.Mode]) {
        if modes.count == 1 {
            self = modes[0] == .common ? .common : .one(modes[0])
        } else {
            self = .several(modes)
        }
    }

    /// The first concrete mode named, or `.default` for `.common` (for the shutdown drain).
    var representative: Loop.Mode {
        switch self {
        case .common: .default
        case .one(let mode): mode
        case .several(let modes): modes.first { $0 != .common } ?? .default
        }
    }
}

/// A block queued with ``Loop/perform(inModes:_:)`` and the modes it may run in (SPEC R57).
struct QueuedBlock {
    let modes: BlockModes
    let body: @Sendable () -> Void

    /// True if the block may run in `mode` (SPEC R58): it names the mode, or names `.common` and
    /// the mode is in the common set.
    @inline(__always)
    func matches(_ mode: ModeState) -> Bool {
        switch modes {
        case .common:
            return mode.isCommon
        case .one(let target):
            return target == mode.mode
        case .several(let targets):
            for target in targets {
                if target == mode.mode || (mode.isCommon && target == .common) { return true }
            }
            return false
        }
    }
}

/// One level of a (possibly nested) run call: what other threads may need to see of it.
struct RunLevelRecord {
    let mode: ModeState
    /// `stop()` was called while this was the innermost level (SPEC R66).
    var stopRequested = false
}

/// The loop's shared structure. Every field is guarded by the loop's lock.
///
/// The lock (or, for the pass's scratch buffers, the loop thread) already guarantees exclusive
/// access, so the fields of the engine's bookkeeping objects opt out of Swift's dynamic
/// exclusivity checks (`@exclusivity(unchecked)`), which otherwise cost a thread-local lookup per
/// access on the hot path.
final class LoopState {
    /// Concrete modes, created on demand (SPEC R4).
    @exclusivity(unchecked) var modes: [Loop.Mode: ModeState] = [:]
    /// The common set (SPEC R62): starts as `{default}`, only grows.
    @exclusivity(unchecked) var commonModes: Set<Loop.Mode> = [.default]
    /// Items added to `.common` (SPEC R63).
    @exclusivity(unchecked) var commonTimers: [ObjectIdentifier: LoopTimer] = [:]
    @exclusivity(unchecked) var commonSources: [ObjectIdentifier: LoopSource] = [:]
    /// Common observers in the order they were added, so a mode made common later gets them in the
    /// same relative order (SPEC R25).
    @exclusivity(unchecked) var commonObservers: [LoopObserver] = []

    @exclusivity(unchecked) var commonDescriptorSources: [ObjectIdentifier: LoopDescriptorSource] = [:]

    /// Registered descriptor sources by epoll token (SPEC R53).
    @exclusivity(unchecked) var descriptorSources: [UInt64: LoopDescriptorSource] = [:]
    /// The next epoll token (0 and 1 are the waiter's eventfd and timerfd).
    @exclusivity(unchecked) var nextDescriptorToken: UInt64 = 2
    /// Descriptor sources not watched for now, because they became ready while the loop ran a mode
    /// they are not in; watched again before a wait in one of their modes.
    @exclusivity(unchecked) var pausedDescriptorSources: [LoopDescriptorSource] = []
    /// Waits that reported a ready descriptor, counted (see `checkStillRegistered`).
    @exclusivity(unchecked) var waitsWithReadiness = 0
    /// Descriptor sources with readiness not yet performed.
    @exclusivity(unchecked) var readyDescriptorSources: [LoopDescriptorSource] = []

    /// The executors' job queues (SPEC N1–N4).
    @exclusivity(unchecked) var jobQueues: [LoopJobQueue] = []
    /// Called once when the loop stops accepting items (ends pending sleeps, ticks and activity
    /// streams; see Loop+Lifecycle.swift).
    @exclusivity(unchecked) var endHandlers: [UInt64: @Sendable () -> Void] = [:]
    /// Resumed async waiters whose tasks will hop onto this loop and have not arrived yet (see
    /// `Loop.holdSeal()`): the drain does not seal while there are any.
    @exclusivity(unchecked) var sealHolds = 0
    @exclusivity(unchecked) var nextEndHandlerToken: UInt64 = 0
    /// The keep-alive object of the `LoopThread` that owns the loop, if any (weak: the `LoopThread`
    /// and the loop's executors hold it).
    @exclusivity(unchecked) var lease = WeakObject()
    /// The main loop watches libdispatch's main-queue handle (see Loop+MainQueue.swift).
    @exclusivity(unchecked) var servesMainQueue = false
    /// The driver running the loop, if any.
    @exclusivity(unchecked) var driver: LoopDriver? = nil
    /// Objects attached by other modules (the shared executors), by mode list. Weak: an executor
    /// lives as long as something (a pinned actor) holds it, and keeps a `LoopThread` running.
    @exclusivity(unchecked) var attachments: [[Loop.Mode]: WeakObject] = [:]

    /// The FIFO of blocks not yet run (SPEC R57).
    @exclusivity(unchecked) var blocks: [QueuedBlock] = []
    /// Sources signalled since the loop last looked, possibly several times or already performed
    /// elsewhere; step 4 sorts them out (SPEC R46).
    @exclusivity(unchecked) var signalledSources: [LoopSource] = []

    /// The run levels, innermost last (SPEC R18).
    @exclusivity(unchecked) var runLevels: [RunLevelRecord] = []
    /// `wakeUp()` was called while the loop was running: the next wait must not block (SPEC R68).
    @exclusivity(unchecked) var wakeUpPending = false

    /// While the loop is blocked in its wait: the mode it waits in and the run's deadline, so another
    /// thread that moves a timer of that mode can re-arm the wait (SPEC R41, M7).
    @exclusivity(unchecked) var sleepingMode: ModeState? = nil
    @exclusivity(unchecked) var sleepingRunDeadline = LoopTime.distantFuture
    /// The deadline the waiter is armed with; `needsArming` after an expiration was not consumed.
    @exclusivity(unchecked) var armedDeadline = LoopState.needsArming
    static let needsArming = Int64.min

    /// open → draining → ended (Loop+Lifecycle.swift): consulted by every entry point.
    @exclusivity(unchecked) var lifecycle = LoopLifecycle.open
    /// Set once, when the teardown detached every item (SPEC R5).
    @exclusivity(unchecked) var isTornDown = false

    /// Timer-heap entries to release after unlocking, from every mode (see `TimerGraveyard`).
    let timerGraveyard = TimerGraveyard()

    /// The next timer sequence number (ties between equal fire dates, SPEC R35).
    @exclusivity(unchecked) var nextTimerSequence: UInt64 = 0

    init() {
        modes.reserveCapacity(4)
        blocks.reserveCapacity(16)
        runLevels.reserveCapacity(4)
    }

    /// The state of `mode`, created on demand (SPEC R4). `mode` must not be `.common`.
    func modeState(_ mode: Loop.Mode) -> ModeState {
        if let existing = existingMode(mode) { return existing }
        let created = ModeState(mode: mode, graveyard: timerGraveyard)
        created.isCommon = commonModes.contains(mode)
        modes[mode] = created
        return created
    }

    /// The concrete modes `mode` names: every common mode for `.common` (SPEC R63).
    func concreteModes(_ mode: Loop.Mode) -> [ModeState] {
        mode == .common ? commonModes.map(modeState) : [modeState(mode)]
    }

    /// True if a queued block may run in `mode` (SPEC R58, R60, M10).
    func hasBlocks(for mode: ModeState) -> Bool {
        blocks.contains { $0.matches(mode) }
    }

    /// True if a valid, signalled source of `mode` is waiting to be performed.
    func hasSignalledSources(in mode: ModeState) -> Bool {
        signalledSources.contains {
            $0.isValid && $0.isSignalled && mode.sources[ObjectIdentifier($0)] != nil
        }
    }

    /// True if an executor with queued jobs may run in `mode` (SPEC N4). Takes the queues' locks.
    func hasJobs(for mode: ModeState) -> Bool {
        jobQueues.contains { !$0.isRunning && $0.matches(mode) && $0.hasQueuedWork }
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
    var innermostMode: ModeState? { runLevels.last?.mode }
}
