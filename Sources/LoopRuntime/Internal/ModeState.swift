import Synchronization

/// Everything a loop keeps for one concrete mode (SPEC R4: created on demand, never destroyed).
///
/// Guarded by the owning loop's lock, except `observerActivities`, an atomic mirror that the loop
/// thread reads without the lock to skip notifications nobody listens to.
final class ModeState {
    let mode: Loop.Mode
    /// In the loop's common set (SPEC R62).
    @exclusivity(unchecked) var isCommon = false

    /// The signalled (v0) sources of this mode.
    @exclusivity(unchecked) var sources: [ObjectIdentifier: LoopSource] = [:]

    /// The timers of this mode that are not firing, by fire date.
    @exclusivity(unchecked) var timerHeap: TimerHeap
    /// Every timer of this mode, firing or not (a firing timer is out of the heap but still keeps
    /// the mode alive).
    @exclusivity(unchecked) var timerCount = 0

    /// How many descriptor sources are in this mode (SPEC R53: they keep it alive).
    @exclusivity(unchecked) var descriptorCount = 0

    /// The observers of this mode in notification order: ascending `order`, equal orders in
    /// insertion order (SPEC R25). Replaced, never mutated in place while a notification holds a
    /// snapshot, so a snapshot is a retain, not a copy.
    @exclusivity(unchecked) var observers: [LoopObserver] = []

    /// The union of the activity masks of `observers`.
    let observerActivities = Atomic<UInt32>(0)

    init(mode: Loop.Mode, graveyard: TimerGraveyard = TimerGraveyard()) {
        self.mode = mode
        self.timerHeap = TimerHeap(graveyard: graveyard)
    }

    deinit {
        for entry in timerHeap.removeAll() { TimerHeap.release(entry) }
    }

    /// R10: no sources and no timers (blocks are checked by the loop; observers never count).
    var hasNoSourcesOrTimers: Bool {
        sources.isEmpty && timerCount == 0 && descriptorCount == 0
    }

    func recomputeObserverActivities() {
        var mask: UInt32 = 0
        for observer in observers { mask |= observer.activities.rawValue }
        observerActivities.store(mask, ordering: .relaxed)
    }
}
