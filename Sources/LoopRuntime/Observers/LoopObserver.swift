import Synchronization

/// An observer of a loop's activities: entry, the top of each pass, before and after waiting, and
/// exit (SPEC D).
///
/// An observer belongs to the first loop it is added to, in any number of its modes (SPEC R26),
/// and is called only for the activities in its mask, only while the loop runs one of its modes
/// (SPEC R24). Observers of the same activity run in ascending ``order``, equal orders in the
/// order they were added (SPEC R25) — use `Int.min` and `Int.max` for "first" and "last" hooks
/// around every pass. Observers never keep a mode alive (SPEC R30).
///
/// ```swift
/// let observer = LoopObserver(activities: [.beforeWaiting]) { _, _ in
///     flushPendingWork()   // runs right before the loop goes to sleep
/// }
/// loop.add(observer, forMode: .common)
/// ```
///
/// - Important: Safe from any thread: create, add, remove and invalidate from anywhere. The
///   handler runs on the loop's thread; while it runs, this observer receives nothing, not even from
///   a nested run it starts (SPEC R29).
public final class LoopObserver: @unchecked Sendable {
    // Thread-safety: `activities`, `repeats`, `order`, `label` and `handler` are immutable. `sharedState` is
    // guarded by the observer's stripe lock; `valid` is an atomic that only changes under it.
    // `memberships` is guarded by the bound loop's lock; `isInCallout` is touched only on the bound
    // loop's thread. Lock order: loop lock, then the stripe lock.

    /// The activities this observer is called for.
    public let activities: Loop.Activity
    /// False for a one-shot observer, invalidated after its first callout (SPEC R28).
    public let repeats: Bool
    /// The call order among observers of the same activity (SPEC R25).
    public let order: Int
    /// The name of the observer's callouts in metrics, stall reports and traces, if it has one.
    public let label: StaticString?
    let handler: @Sendable (LoopObserver, Loop.Activity) -> Void

    /// Guarded by the observer's stripe lock (`withShared`).
    @exclusivity(unchecked) private var sharedState = LoopBinding()
    let valid = Atomic<Bool>(true)

    /// Runs `body` on the shared state with the observer's stripe lock held. Never nest two.
    @inline(__always)
    func withShared<R>(_ body: (inout LoopBinding) -> R) -> R {
        LockStripes.lock(for: self).withLock { body(&sharedState) }
    }

    /// An observer of the loop's own libraries that records the activity and returns at once: the
    /// loop does not count its callout as time passing (see `callObservers`), and the instruments
    /// do not record it as a callout.
    let takesNoTime: Bool
    /// False for the engine's own bookkeeping observers, which the instruments do not record.
    let isRecorded: Bool

    /// The modes of the bound loop the observer is in; guarded by that loop's lock.
    @exclusivity(unchecked) var memberships: [ModeState] = []
    /// The handler runs (SPEC R29); touched only on the bound loop's thread.
    @exclusivity(unchecked) var isInCallout = false

    /// Creates an observer.
    ///
    /// - Parameters:
    ///   - activities: The activities to be called for; fixed at creation (SPEC R24).
    ///   - repeats: `false` for an observer that is invalidated after its first callout (SPEC R28).
    ///   - order: Lower orders are called first; negative orders are allowed (SPEC R25).
    ///   - label: The name of the observer's callouts in stall reports and traces (a static
    ///     string: no allocation). Defaults to none.
    ///   - handler: Called on the loop's thread with the observer and the single activity. The mode
    ///     being run is ``Loop/currentMode``.
    public convenience init(
        activities: Loop.Activity,
        repeats: Bool = true,
        order: Int = 0,
        label: StaticString? = nil,
        _ handler: @escaping @Sendable (LoopObserver, Loop.Activity) -> Void
    ) {
        self.init(
            activities: activities, repeats: repeats, order: order, label: label, takesNoTime: false, handler)
    }

    /// An observer whose handler only records the activity and returns at once (it never blocks,
    /// runs user code or waits). The loop does not re-read its clock after calling it, so that the
    /// activities around it share one reading (`Loop.notification`). Support for the
    /// `LoopExecutor` module's activity stream.
    ///
    /// - Important: Safe from any thread; the handler runs on the loop's thread.
    package convenience init(
        recordingActivities activities: Loop.Activity,
        order: Int,
        _ handler: @escaping @Sendable (LoopObserver, Loop.Activity) -> Void
    ) {
        self.init(activities: activities, repeats: true, order: order, label: nil, takesNoTime: true, handler)
    }

    /// The designated initializer; `takesNoTime` and `isRecorded: false` for the package's own
    /// observers (see those properties).
    init(
        activities: Loop.Activity, repeats: Bool, order: Int, label: StaticString?, takesNoTime: Bool,
        isRecorded: Bool = true,
        _ handler: @escaping @Sendable (LoopObserver, Loop.Activity) -> Void
    ) {
        self.activities = activities
        self.repeats = repeats
        self.order = order
        self.label = label
        self.handler = handler
        self.takesNoTime = takesNoTime
        self.isRecorded = isRecorded && !takesNoTime
    }

    /// False once the observer was invalidated (SPEC R31).
    ///
    /// - Important: Safe from any thread.
    public var isValid: Bool { valid.load(ordering: .acquiring) }

    /// Detaches the observer from every mode of its loop; it is never called again, even if it is
    /// waiting its turn in the notification under way (SPEC R27, R31). Idempotent.
    ///
    /// When it returns, the handler is not running and will not run again — unless you call it on
    /// the loop's thread (from the handler itself or another callout: it returns at once), or while
    /// the handler runs a nested run of the loop. Called on another thread while the loop is in the
    /// middle of the handler, it waits for the handler to return; so the handler must not wait for
    /// the thread that invalidates it.
    ///
    /// - Important: Safe from any thread, including the observer's own handler.
    public func invalidate() { invalidateBoundItem() }
}

extension LoopObserver: LoopBoundCalloutItem {
    var isValidForCallout: Bool { valid.load(ordering: .sequentiallyConsistent) }
    func clearValidity() { valid.store(false, ordering: .sequentiallyConsistent) }
    func leaveModes(of loop: Loop) { loop.removeInvalidated(self) }
}

extension LoopObserver: LoopBoundItem {
    static var itemName: String { "LoopObserver" }
    static var bindingRule: String { "R26" }

    func withBinding<R>(_ body: (inout LoopBinding, _ isValid: Bool) -> R) -> R {
        withShared { body(&$0, valid.load(ordering: .relaxed)) }
    }
}
