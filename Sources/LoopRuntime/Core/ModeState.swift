import Synchronization

/// Everything a loop keeps for one concrete mode (SPEC R4: created on demand, never destroyed).
///
/// Guarded by the owning loop's lock. The atomics mirror locked fields (written with the lock
/// held) so that the loop thread can skip, without the lock, a step that has nothing to do:
/// notifications nobody listens to, a timer heap with nothing due, descriptors nobody watches.
final class ModeState {
    let mode: Loop.Mode

    /// In the loop's common set (SPEC R62). Only ever becomes true (with the loop's lock held);
    /// read without the lock by the pass and the executors' queues.
    var isCommon: Bool { commonFlag.load(ordering: .acquiring) }
    private let commonFlag = Atomic<Bool>(false)

    /// Adds the mode to the common set. Lock held.
    func markCommon() {
        commonFlag.store(true, ordering: .releasing)
    }

    /// The signalled (v0) sources of this mode.
    @exclusivity(unchecked) var sources: [ObjectIdentifier: LoopSource] = [:]

    /// The timers of this mode that are not firing, by fire date; mirrored by `earliestEntry`.
    @exclusivity(unchecked) var timerHeap: TimerHeap {
        didSet { rootFireDate.update(timerHeap.entries.first?.fireDate ?? .max) }
    }
    /// The fire date of the heap's root, live or stale: no timer of this mode is due before it.
    private let rootFireDate = Atomic<Int64>(.max)

    /// Without the lock (loop thread): false only if no timer of this mode is due at `now`.
    @inline(__always)
    func mayHaveTimersDue(at now: Int64) -> Bool {
        rootFireDate.load(ordering: .acquiring) <= now
    }
    /// Every timer of this mode, firing or not (a firing timer is out of the heap but still keeps
    /// the mode alive).
    @exclusivity(unchecked) var timerCount = 0

    /// How many descriptor sources are in this mode (SPEC R53: they keep it alive).
    @exclusivity(unchecked) var descriptorCount = 0 {
        didSet { descriptorMirror.update(descriptorCount) }
    }
    private let descriptorMirror = Atomic<Int>(0)

    /// Without the lock (loop thread): false only if the mode has no descriptor source.
    var mayHaveDescriptorSources: Bool { descriptorMirror.load(ordering: .acquiring) > 0 }

    /// The observers of this mode in notification order: ascending `order`, equal orders in
    /// insertion order (SPEC R25). Replaced, never mutated in place while a notification holds a
    /// snapshot, so a snapshot is a retain, not a copy.
    @exclusivity(unchecked) var observers: [LoopObserver] = []

    /// The union of the activity masks of `observers`.
    let observerActivities = Atomic<UInt32>(0)
    /// Bumped (under the lock) after every change of `observers`, so that the loop's thread can
    /// tell its snapshot is current without taking the lock.
    let observersVersion = Atomic<UInt64>(0)

    /// The loop thread's snapshot of `observers` and the version it was taken at (SPEC R27). Only
    /// the loop's thread touches these (and teardown, when nothing runs): notifications of one run
    /// call reuse the snapshot while the version stands; a stale one is replaced at the next
    /// notification that has observers to call, and dropped (in every mode) when a run call
    /// returns or the loop goes to sleep (`Loop.dropStaleObserverSnapshots`). A current one holds
    /// only what `observers` holds.
    @exclusivity(unchecked) var observerSnapshot: [LoopObserver] = []
    /// The version `observerSnapshot` was taken at (loop thread only, as the snapshot).
    @exclusivity(unchecked) var observerSnapshotVersion: UInt64 = 0

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
        observersVersion.wrappingAdd(1, ordering: .releasing)
    }
}
