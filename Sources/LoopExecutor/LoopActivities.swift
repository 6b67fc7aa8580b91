@_spi(LoopExecutorSupport) import LoopRuntime

/// One notification of a loop's activity, as delivered by ``LoopActivities``.
///
/// - Important: A value type; safe from any thread.
public struct LoopActivityEvent: Sendable, Hashable, CustomStringConvertible {
    /// The single activity notified (SPEC R24).
    public let activity: Loop.Activity
    /// The mode being run.
    public let mode: Loop.Mode
    /// When the observer was called.
    public let time: ContinuousClock.Instant
    /// How many run calls were in progress (1 for an outermost run, more inside nested runs).
    public let depth: Int
    /// How many events the buffering policy dropped since the previous delivered event.
    public let dropped: Int

    /// `E@default#1`, with `(N dropped)` when events were dropped since the previous one.
    public var description: String {
        "\(activity)@\(mode)#\(depth)" + (dropped > 0 ? " (\(dropped) dropped)" : "")
    }

    func stamped(dropped: Int) -> LoopActivityEvent {
        LoopActivityEvent(activity: activity, mode: mode, time: time, depth: depth, dropped: dropped)
    }
}

/// What an activity stream keeps when its consumer falls behind.
///
/// - Important: A value type; safe from any thread.
public enum LoopActivityBuffering: Sendable, Hashable {
    /// Keep the newest `capacity` events, dropping the oldest (for "what is the loop doing now").
    case dropOldest(capacity: Int)
    /// Keep the oldest `capacity` events, dropping new ones (for "what happened first").
    case dropNewest(capacity: Int)

    var capacity: Int {
        switch self {
        case .dropOldest(let capacity), .dropNewest(let capacity): capacity
        }
    }
}

extension Loop {
    /// An async sequence of this loop's activities: entry, exit, the top of each pass, before and
    /// after waiting (SPEC D), for stall detection, tracing and per-pass metrics.
    ///
    /// The stream's observer (order `Int.max`, so it sees each activity after the other observers)
    /// only appends to a bounded buffer and never blocks or re-enters the loop. When the consumer
    /// falls behind, `buffering` decides which events are dropped; every drop is counted and
    /// reported in the next delivered event's ``LoopActivityEvent/dropped``. The stream ends
    /// when the consuming task is cancelled (the observer is removed at once) or when the loop's
    /// thread ends (after the buffered events).
    ///
    /// ```swift
    /// for await event in loop.activities([.afterWaiting, .beforeWaiting]) {
    ///     // a pass is the time between AW and the next BW
    /// }
    /// ```
    ///
    /// The observer is added when iteration starts.
    ///
    /// **Consumers on the loop's own thread.** An actor pinned to this loop (or a task that prefers
    /// its executor, or `@MainActor` code on the main loop) runs its iteration in the loop's passes,
    /// so every resumption of it is a job that makes the loop run another pass — whose activities
    /// would resume it again, for ever, at 100% CPU. So such a consumer is not resumed at each
    /// event: its events are buffered and handed over in a batch when the loop wakes up
    /// (``Loop/Activity/afterWaiting``), when a run ends (``Loop/Activity/exit``) or when the buffer
    /// is half full — both observed for this even when not asked for. An idle loop observed from
    /// its own executor therefore goes to sleep and stays asleep; each wake-up costs one extra pass
    /// to deliver the batch. A consumer on another thread gets every event as it happens.
    ///
    /// - Parameters:
    ///   - activities: The activities to report.
    ///   - modes: The modes to observe; defaults to `Loop.Mode.common`.
    ///   - buffering: The buffer size and drop policy; defaults to keeping the newest 1,024.
    /// - Important: Safe from any thread. Iterate from one task at a time. The stream also ends (after
    ///   the events already buffered) when the loop stops accepting work — its `LoopThread` begins
    ///   shutting down, before the thread's executors stop, or its thread exits.
    public func activities(
        _ activities: Activity = .allActivities,
        in modes: [Mode] = [.common],
        buffering: LoopActivityBuffering = .dropOldest(capacity: 1024)
    ) -> LoopActivities {
        precondition(buffering.capacity > 0, "Loop.activities: the buffer capacity must be positive.")
        precondition(!modes.isEmpty, "Loop.activities: the mode list is empty, so nothing would be observed.")
        return LoopActivities(loop: self, activities: activities, modes: modes, buffering: buffering)
    }
}

/// The activities of a loop as an async sequence; see
/// `Loop.activities(_:in:buffering:)`.
///
/// - Important: Safe from any thread; each iterator belongs to one task.
public struct LoopActivities: AsyncSequence, Sendable {
    /// The element: a ``LoopActivityEvent``.
    public typealias Element = LoopActivityEvent

    let loop: Loop
    let activities: Loop.Activity
    let modes: [Loop.Mode]
    let buffering: LoopActivityBuffering

    /// Adds the observer and returns an iterator over its events.
    public func makeAsyncIterator() -> Iterator {
        Iterator(storage: ActivityStorage(self))
    }

    /// Iterates the events; ends when its task is cancelled or the loop's thread ends.
    public struct Iterator: AsyncIteratorProtocol {
        let storage: ActivityStorage

        /// The next event, or `nil` once the stream ended.
        public mutating func next() async -> LoopActivityEvent? {
            await storage.next(isolation: nil)
        }

        /// The next event, or `nil` once the stream ended; waits in the caller's isolation, so an
        /// actor pinned to the loop is resumed by a job of the loop itself (`for await` uses this).
        public mutating func next(isolation actor: isolated (any Actor)?) async -> LoopActivityEvent? {
            await storage.next(isolation: actor)
        }
    }
}

/// The buffer between an activity observer (producer, on the loop's thread) and one consumer.
final class ActivityStorage: Sendable {
    private struct State {
        /// A ring buffer: `buffer[head..<head+count]` modulo capacity (plain values, no optionals:
        /// the slots outside the window hold stale events).
        var buffer: [LoopActivityEvent]
        var head = 0
        var count = 0
        var droppedSinceLast = 0
        var waiter: UnsafeContinuation<LoopActivityEvent?, Never>?
        /// The waiting consumer waits on the loop's thread: it gets its events in batches (see
        /// `Loop.activities(_:in:buffering:)`).
        var waiterIsOnLoopThread = false
        /// The loop the waiter's task hops onto when resumed, and the seal hold taken on it for the
        /// resumption in flight (see Locked+Resume.swift).
        var waiterHopTarget: Loop?
        var held: Loop?
        var finished = false
        var teardownToken: UInt64?

        mutating func push(_ event: LoopActivityEvent, policy: LoopActivityBuffering) {
            let capacity = buffer.count
            if count == capacity {
                droppedSinceLast += 1
                guard case .dropOldest = policy else { return }
                head = head + 1 == capacity ? 0 : head + 1
                count -= 1
            }
            let slot = head + count
            buffer[slot >= capacity ? slot - capacity : slot] = event
            count += 1
        }

        /// The oldest buffered event, stamped with the drops since the previous delivery.
        mutating func pop() -> LoopActivityEvent? {
            guard count > 0 else { return nil }
            let event = buffer[head]
            head = head + 1 == buffer.count ? 0 : head + 1
            count -= 1
            return deliver(event)
        }

        mutating func deliver(_ event: LoopActivityEvent) -> LoopActivityEvent {
            defer { droppedSinceLast = 0 }
            return event.stamped(dropped: droppedSinceLast)
        }
    }

    private let state: Locked<State>
    private let observer: LoopObserver
    private let loop: Loop
    private let buffering: LoopActivityBuffering

    init(_ activities: LoopActivities) {
        loop = activities.loop
        buffering = activities.buffering
        let placeholder = LoopActivityEvent(activity: [], mode: .default, time: .now, depth: 0, dropped: 0)
        let state = Locked(State(buffer: Array(repeating: placeholder, count: activities.buffering.capacity)))
        self.state = state
        let loop = activities.loop
        let policy = activities.buffering
        let requested = activities.activities
        // `afterWaiting` and `exit` hand a batch to a consumer on the loop's thread (see
        // `Loop.activities(_:in:buffering:)`), so they are observed whatever was asked for.
        let observed = requested.union([.afterWaiting, .exit])
        let capacity = policy.capacity
        observer = LoopObserver(activities: observed, order: .max) { _, activity in
            let (mode, depth) = loop.runLevel
            let event = LoopActivityEvent(
                activity: activity, mode: mode ?? .default, time: .now, depth: depth, dropped: 0)
            state.withLock { state in
                guard !state.finished else { return }
                if requested.contains(activity) { state.push(event, policy: policy) }
                guard let waiter = state.waiter else { return }
                if state.waiterIsOnLoopThread {
                    let batchPoint = activity == .afterWaiting || activity == .exit || state.count * 2 >= capacity
                    guard batchPoint else { return }
                }
                guard let delivered = state.pop() else { return }
                state.waiter = nil
                state.held = state.waiterHopTarget.holdForResume()
                waiter.resume(returning: delivered)  // inside the lock: see Locked+Resume.swift
            }
        }
        let weakSelf = WeakActivityStorage()
        weakSelf.storage = self
        let token = loop.addEndHandler { weakSelf.storage?.finish(drain: true) }
        state.withLock { $0.teardownToken = token }
        if token == nil {
            state.withLock { $0.finished = true }
        } else {
            for mode in activities.modes { loop.add(observer, forMode: mode) }
        }
    }

    deinit {
        finish(drain: false)
    }

    func next(isolation actor: isolated (any Actor)?) async -> LoopActivityEvent? {
        if Task.isCancelled {
            finish(drain: false)
            return nil
        }
        let onLoopThread = loop.isCurrentThread
        let target = hopTarget(of: actor)
        // Taking the hold out also orders the resumer's work before ours (Locked+Resume.swift).
        defer { state.withLock { $0.held.take() }?.releaseSealHold() }
        return await withTaskCancellationHandler {
            // `isolation: actor` makes this closure capture the actor and so run isolated to it
            // (SE-0420). Without it the closure ran on the global pool, and its return hopped
            // back onto the actor: a job enqueued on a loop whose shutdown had already drained.
            await withUnsafeContinuation(isolation: actor) { continuation in
                let ready: LoopActivityEvent?? = state.withLock { state in
                    if let event = state.pop() { return .some(event) }
                    if state.finished { return .some(nil) }
                    state.waiter = continuation
                    state.waiterIsOnLoopThread = onLoopThread
                    state.waiterHopTarget = target
                    return nil
                }
                if let ready { continuation.resume(returning: ready) }
            }
        } onCancel: {
            finish(drain: false)
        }
    }

    /// Ends the stream: removes the observer; a waiting consumer gets `nil`. With `drain`, events
    /// already buffered are still delivered.
    func finish(drain: Bool) {
        let (waiter, token): (UnsafeContinuation<LoopActivityEvent?, Never>?, UInt64?) = state.withLock {
            state in
            let waiter = state.waiter
            let token = state.teardownToken
            if waiter != nil { state.held = state.waiterHopTarget.holdForResume() }
            state.finished = true
            state.waiter = nil
            state.teardownToken = nil
            if !drain {
                state.count = 0
                state.head = 0
            }
            return (waiter, token)
        }
        observer.invalidate()
        if let token { loop.removeEndHandler(token) }
        if let waiter { state.resume(waiter, returning: nil) }
    }
}

/// Lets the teardown handler reach the storage without keeping it alive.
private final class WeakActivityStorage: @unchecked Sendable {
    // Written once in ActivityStorage.init before the handler can run; read after.
    weak var storage: ActivityStorage?
}
