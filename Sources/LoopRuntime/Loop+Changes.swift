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
struct LoopChange {
    /// Where new work may run.
    enum Work {
        /// Queued blocks of these modes (SPEC R57, R58).
        case blocks(BlockModes)
        /// A signalled source: it runs in the modes that contain it.
        case source(ObjectIdentifier)
        /// Anything in this mode (it just became common, so `.common` work can run there).
        case mode(ModeState)
    }

    fileprivate var work: Work?
    fileprivate var lookAgain = false
    fileprivate var removedItems = false
    fileprivate var movedTimers = false
    /// The mode the moved timers are in, if it is only one (the usual case): a re-arm is needed
    /// only if it is the sleeping mode.
    fileprivate var movedTimersMode: ModeState?
    fileprivate var movedTimersModes: ModeList?

    /// Work was queued that may run where `work` says.
    mutating func queued(_ work: Work) {
        if self.work == nil {
            self.work = work
        } else {
            lookAgain = true  // two kinds of work in one change: simply look
        }
    }

    /// The loop must look again whatever mode it runs (a stop, a wake-up, a drain that may seal).
    mutating func mustLookAgain() {
        lookAgain = true
    }

    /// Items left modes: the running mode may have nothing left.
    mutating func removedItemsFromModes() {
        removedItems = true
    }

    /// Timers of `mode` moved, appeared or disappeared.
    mutating func movedTimers(in mode: ModeState) {
        if movedTimers, movedTimersMode !== mode { movedTimersMode = nil }
        if !movedTimers { movedTimersMode = mode }
        movedTimers = true
    }

    /// Timers of `modes` moved, appeared or disappeared.
    mutating func movedTimers(in modes: ModeList) {
        movedTimers = true
        movedTimersMode = nil
        movedTimersModes = modes
    }

    /// Timers of some modes moved (re-checked against the sleeping mode's heap).
    mutating func movedTimersSomewhere() {
        movedTimers = true
        movedTimersMode = nil
        movedTimersModes = nil
    }
}

extension Loop {
    /// Makes a change to the loop's shared state under its lock and applies the wake rule (see
    /// above). The body must not call out to user code.
    @inline(__always)
    func change<R>(_ body: (inout LoopChange) -> R) -> R {
        let (result, notify): (R, Bool) = lock.withLock {
            var change = LoopChange()
            let result = body(&change)
            return (result, applyWakeRule(change))
        }
        if notify { notifyLoop() }
        return result
    }

    /// The wake rule. Lock held; true if the loop must be notified after unlocking.
    private func applyWakeRule(_ change: LoopChange) -> Bool {
        guard let running = state.innermostMode else { return false }  // SPEC M4
        if change.movedTimers, let sleeping = state.sleepingMode {
            let affected =
                change.movedTimersMode.map { $0 === sleeping }
                ?? change.movedTimersModes.map { $0.contains(sleeping) }
                ?? true
            if affected {
                waiter.arm(min(state.sleepingRunDeadline, sleeping.timerHeap.wakeDeadline()))
            }
        }
        if change.lookAgain { return true }
        if let work = change.work {
            switch work {
            case .blocks(let modes):
                if modes.matches(running) { return true }
            case .source(let id):
                if running.sources[id] != nil { return true }
            case .mode(let mode):
                if mode === running { return true }
            }
        }
        if change.removedItems, running.hasNoSourcesOrTimers, !owner.isCurrent {
            // A removal on the loop's own thread, from a callout, leaves the pass alone: emptiness
            // is decided at the end of the pass (SPEC R14).
            state.wakeUpPending = true
            return true
        }
        return false
    }
}
