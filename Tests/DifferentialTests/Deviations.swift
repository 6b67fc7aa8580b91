import LoopRuntime

// Where LoopRuntime deliberately differs from the CFRunLoop on this machine, each difference in
// one place, with its rule: the LoopRuntime side of a program is adjusted so that the traces
// compare equal when — and only when — the engines differ by this rule alone.

enum Deviations {
    /// SPEC R60 (a pending matching block keeps its mode alive) and R10. In CF a mode comes into
    /// being only when an item (source, timer, observer) is added to it, directly or as a common
    /// item, or a block is performed naming it; a block for `kCFRunLoopCommonModes` creates none. Running a mode that was never created returns `finished`
    /// at once, even when a block queued for `.common` could run there because the mode was made
    /// common meanwhile. LoopRuntime knows every mode named to it, and runs the block (R60). The
    /// LoopRuntime side answers `finished` for a mode CF would not have created yet.
    static func modeIsMissingInCF(_ mode: ModeName, created: Set<ModeName>) -> Bool {
        !created.contains(mode)
    }

    /// SPEC R32 ("a fire date in the past means due now"). CF takes that literally when a timer is
    /// *created*: its fire date becomes the moment of creation, so timers created with past dates
    /// fire in the order they were created, whatever their dates. LoopRuntime keeps the date given
    /// and fires due timers in date order (R35). The LoopRuntime side gives past timers the dates
    /// CF gives them: the creation moment, one nanosecond apart in creation order.
    static func fireDate(
        _ date: ContinuousClock.Instant, createdAt now: ContinuousClock.Instant, creationIndex: Int
    ) -> ContinuousClock.Instant {
        date < now ? now + .nanoseconds(Int64(creationIndex)) : date
    }

    /// SPEC R25 (equal orders keep insertion order) and R62, against CF's hash set of common items:
    /// a mode made common receives them in the set's order, which follows memory addresses, so
    /// observers of equal order reach that mode in an order that changes from run to run (seen
    /// in 2 to 4 of 100,000 programs). LoopRuntime adds them in the order they became common
    /// items. In a program that makes a mode common, the generator gives the observers distinct
    /// orders (ties broken by index, the relative order of unequal ones kept).
    static func breakObserverOrderTies(_ observers: inout [ObserverSpec]) {
        for index in observers.indices { observers[index].order = observers[index].order * 10 + index }
    }

    /// SPEC R58 (non-matching blocks stay queued). CF takes the whole block queue out for a block
    /// step, so a nested run made from a block's callout sees no block queued before the step;
    /// LoopRuntime keeps the non-matching ones queued and visible (a block that runs a modal mode
    /// can service the blocks waiting for it). Excused: the generator makes no nested run from a
    /// block callout unless `LOOP_DIFFERENTIAL_ALL=1`.
    static let blocksStayVisible = "nested runs from block callouts"

    /// SPEC R34 ("fires at the first opportunity") and R38, against a quirk of CF's Linux build:
    /// each mode arms a timer descriptor of its own for its earliest timer, skipping a timer that
    /// is firing (R42). When a repeating timer's callout moves the timer to the past, CF re-arms
    /// only the mode whose pass fired it; another mode of the timer stays armed for its next
    /// timer, and a run of that mode does not fire the moved timer until then (observed: never
    /// within a 0.3 s run, with another timer an hour away in that mode). LoopRuntime fires it in
    /// the next pass of any of its modes (R38: due at once). The generator leaves this shape out
    /// unless `LOOP_DIFFERENTIAL_ALL=1`.
    static let timerMovesItselfToThePast = "a timer callout moving its own timer to the past"

    /// SPEC M4 (a wake-up sent while the loop was not running is discarded) against a quirk of
    /// CF's Linux build: CF's `stop()` also wakes the loop, and a wake-up its run did not take
    /// (stopped by an entry observer before the first wait, or a zero-timeout run stopped after
    /// its poll) is still pending when the next run starts. CF's Linux wait reports one port per
    /// wait, that wake-up comes first, and timers already due do not fire in that pass (in a
    /// zero-timeout run: not at all). LoopRuntime discards it (M4) and fires them. The CF side
    /// takes the stale wake-up after each top-level run that called `stop()`, with a zero-timeout
    /// run of a private mode.
    static let stopLeavesAWakeUp = true

    /// Excused, a quirk of CF's Linux build: `stop()` also wakes the loop, and CF's Linux wait
    /// reports one port per wait. A `stop()` made during a pass before its wait (from a source, a
    /// block, an observer) makes that wait return the wake-up alone: timers already due do not
    /// fire in that pass (in a zero-timeout run: not in that run). LoopRuntime fires them (SPEC
    /// R19 step 10 does not depend on what woke the loop). The generator leaves `stop()` out of
    /// programs with timers unless `LOOP_DIFFERENTIAL_ALL=1`.
    static let stopHidesDueTimers = "stop() during a pass, with due timers"

    /// The excused difference whose shape a shrunk program still has, if any: with
    /// `LOOP_DIFFERENTIAL_ALL=1` the generator makes these shapes, and a disagreement is excused
    /// only if shrinking could not remove the shape (so another cause would have been reported).
    static func excuse(_ program: Program) -> String? {
        let blockRunsNested = program.blocks.contains { block in
            block.actions.contains { if case .nestedRun = $0 { true } else { false } }
        }
        if blockRunsNested { return blocksStayVisible }
        let everyAction =
            program.sources.flatMap(\.actions) + program.observers.flatMap(\.actions)
            + program.timers.flatMap(\.actions) + program.blocks.flatMap(\.actions)
            + program.steps.compactMap { if case .action(let action) = $0 { action } else { nil } }
        let addsTimers = program.steps.contains { if case .addTimer = $0 { true } else { false } }
        if addsTimers && everyAction.contains(.stop) { return stopHidesDueTimers }
        let movesItself = program.timers.indices.contains { index in
            program.timers[index].repeats && program.timers[index].actions.contains(.setFireDate(index, past: true))
        }
        if movesItself { return timerMovesItselfToThePast }
        return nil
    }
}
