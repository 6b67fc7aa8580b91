// The one path by which a change reaches the loop, and the one wake rule.
//
// Every change to the loop's shared state — an item added, removed, moved or signalled, a block
// queued, a mode made common, a stop or wake-up asked for — is made inside `change(_:)`, from any
// thread. The body makes the change under the loop's lock and says, in `LoopChange`, what it
// means for a run in progress: work that may run in some modes, timers moved in some modes,
// items gone, or "look again" whatever the loop runs. `change(_:)` then applies the wake rule
// once, still under the lock:
//
// - timers moved in the mode the loop sleeps in: re-arm its wait for the new earliest deadline,
//   no wake-up (SPEC R41, M7);
// - work that may run in the innermost running mode, or "look again": notify the loop (SPEC M2,
//   R67, R68) — after unlocking, at most one eventfd write per idle→busy transition
//   (Loop+Wait.swift);
// - items removed from another thread while the running mode has nothing left that keeps it
//   alive: the next wait must not block, so that the run returns `finished` at once (SPEC M7,
//   R10, R14).
//
// A loop that is not running is never woken: a run that starts later sees the change itself
// (SPEC M4, R10). Executor jobs are the one other way in (LoopJobQueue.swift): their queues have
// their own lock and sleep flag, so that an enqueue costs no loop lock, under the same rule (notify
// only a loop sleeping in a mode the queue can run in).

/// What a change means for a run in progress; filled in by the body of ``Loop/change(_:)``.
///
/// Each call is judged at once against the run in progress and the mode the loop sleeps in (read
/// when the change began: a change never alters them), so that the record is a few flags — a
/// change costs no reference counting, which matters at millions of cross-thread blocks a second.
struct LoopChange {
    /// The innermost running mode and the mode the loop is blocked in, if any, unretained: a loop
    /// never destroys a mode, and a change must not touch their reference counts (see
    /// `LoopState.innermostModeRef`).
    private let running: Unmanaged<ModeState>?
    private let sleeping: Unmanaged<ModeState>?
    fileprivate private(set) var notify = false
    fileprivate private(set) var rearm = false
    fileprivate private(set) var removedItems = false

    @inline(__always)
    fileprivate init(_ state: LoopState) {
        running = state.innermostModeRef
        sleeping = state.sleepingModeRef
    }

    /// A block was queued for `modes` (SPEC R57, R58).
    @inline(__always)
    mutating func queuedBlock(for modes: BlockModes) {
        if let running, running._withUnsafeGuaranteedRef({ modes.matches($0) }) { notify = true }
    }

    /// A source was signalled: it runs in the modes that contain it.
    mutating func signalled(_ source: ObjectIdentifier) {
        if let running, running._withUnsafeGuaranteedRef({ $0.sources[source] != nil }) { notify = true }
    }

    /// `mode` just became common, so work queued for `.common` can run there.
    mutating func madeCommon(_ mode: ModeState) {
        if Self.same(mode, running) { notify = true }
    }

    /// The loop must look again whatever mode it runs (a stop, a wake-up, a drain that may seal).
    mutating func mustLookAgain() {
        if running != nil { notify = true }  // SPEC M4: a loop that is not running is not woken
    }

    /// Items left modes: the running mode may have nothing left.
    mutating func removedItemsFromModes() {
        removedItems = true
    }

    /// Timers of `mode` moved, appeared or disappeared.
    mutating func movedTimers(in mode: ModeState) {
        if Self.same(mode, sleeping) { rearm = true }
    }

    /// Timers of `modes` moved, appeared or disappeared.
    mutating func movedTimers(in modes: ModeList) {
        if let sleeping, sleeping._withUnsafeGuaranteedRef({ modes.contains($0) }) { rearm = true }
    }

    /// Timers of some modes moved (the sleeping mode's heap is looked at again).
    mutating func movedTimersSomewhere() {
        if sleeping != nil { rearm = true }
    }

    @inline(__always)
    /// Compares identities only; `reference` is never dereferenced here.
    private static func same(_ mode: ModeState, _ reference: Unmanaged<ModeState>?) -> Bool {
        reference?.toOpaque() == Unmanaged.passUnretained(mode).toOpaque()
    }
}

extension Loop {
    /// Makes a change to the loop's shared state under its lock and applies the wake rule (see
    /// above). The body must not call out to user code.
    ///
    /// Timer-heap entries the change dropped (an invalidation or removal that compacted a heap, a
    /// re-arm that pruned one) are given back here, after unlocking, on the calling thread: the
    /// loop's next pass may never come — the loop may sleep for hours, not run, or run a mode
    /// that is now empty — and an invalidated timer must not keep its handler's captures alive
    /// until then.
    @inline(__always)
    func change<R>(_ body: (inout LoopChange) -> R) -> R {
        let (result, notify, dropped): (R, Bool, [TimerHeap.Entry]?) = lock.withLock {
            var change = LoopChange(state)
            let result = body(&change)
            let notify = applyWakeRule(change)
            return (result, notify, state.timerGraveyard.takeIfAny())
        }
        if notify { notifyLoop() }  // first: a big release must not delay the wake-up
        if var dropped { releaseDropped(&dropped) }
        return result
    }

    /// The wake rule. Lock held; true if the loop must be notified after unlocking.
    private func applyWakeRule(_ change: LoopChange) -> Bool {
        if change.rearm, let sleeping = state.sleepingMode {
            waiter.arm(min(state.sleepingRunDeadline, sleeping.timerHeap.wakeDeadline()))
        }
        if change.notify { return true }  // only ever set while a run is in progress (SPEC M4)
        guard change.removedItems, let running = state.innermostMode else { return false }
        if running.hasNoSourcesOrTimers, !owner.isCurrent {
            // A removal on the loop's own thread, from a callout, leaves the pass alone: emptiness
            // is decided at the end of the pass (SPEC R14).
            state.wakeUpPending = true
            return true
        }
        return false
    }
}
