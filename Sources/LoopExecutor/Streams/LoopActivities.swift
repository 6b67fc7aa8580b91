import LoopRuntime

/// One notification of a loop's activity, as delivered by ``LoopActivities``.
///
/// - Important: A value type; safe from any thread.
public struct LoopActivityEvent: Sendable, Hashable, CustomStringConvertible {
    /// The single activity notified (SPEC R24).
    public let activity: Loop.Activity
    /// The mode being run.
    public let mode: Loop.Mode
    /// When the loop notified the activity: its clock reading, to the nanosecond, taken after each
    /// wait and after each callout of user code and shared by the activities in between (so
    /// `entry`, `beforeTimers` and `beforeSources` of a pass with nothing to do carry the same
    /// time). A loop on virtual time (a test's manual waiter) stamps virtual time.
    public var time: ContinuousClock.Instant { storedTime.instant }
    /// How many run calls were in progress (1 for an outermost run, more inside nested runs).
    public let depth: Int
    /// How many events the buffering policy dropped since the previous delivered event.
    public let dropped: Int
    /// `time` as plain data (see `StoredInstant`).
    private let storedTime: StoredInstant

    init(activity: Loop.Activity, mode: Loop.Mode, time: ContinuousClock.Instant, depth: Int, dropped: Int) {
        self.init(activity: activity, mode: mode, storedTime: StoredInstant(time), depth: depth, dropped: dropped)
    }

    init(activity: Loop.Activity, mode: Loop.Mode, storedTime: StoredInstant, depth: Int, dropped: Int) {
        self.activity = activity
        self.mode = mode
        self.storedTime = storedTime
        self.depth = depth
        self.dropped = dropped
    }

    /// `E@default#1`, with `(N dropped)` when events were dropped since the previous one.
    public var description: String {
        "\(activity)@\(mode)#\(depth)" + (dropped > 0 ? " (\(dropped) dropped)" : "")
    }

    func stamped(dropped: Int) -> LoopActivityEvent {
        LoopActivityEvent(activity: activity, mode: mode, storedTime: storedTime, depth: depth, dropped: dropped)
    }
}

/// What a loop's event stream keeps when its consumer falls behind: an activity stream
/// (`Loop.activities(_:inModes:buffering:)`) or a stall stream (`Loop.stalls(longerThan:buffering:)`).
/// The events dropped are counted in the next one delivered (`dropped`).
///
/// - Important: A value type; safe from any thread.
public enum LoopBuffering: Sendable, Hashable {
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
    /// The observer is added when the stream is made, so the first iteration also gets the events
    /// between then and its first `next()` (within `buffering`); a second iteration of the same
    /// stream value adds an observer of its own when it starts.
    ///
    /// **Consumers on the loop's own thread.** An actor pinned to this loop (or a task that prefers
    /// its executor, or `@MainActor` code on the main loop) runs its iteration in the loop's passes,
    /// so every resumption of it is a job that makes the loop run another pass — whose activities
    /// would resume it again, for ever, at 100% CPU. So such a consumer is not resumed at each
    /// event: its events are buffered and handed over in a batch when the loop wakes up
    /// (`Loop.Activity.afterWaiting`), when a run ends (`Loop.Activity.exit`) or when the buffer
    /// is half full — both observed for this even when not asked for. An idle loop observed from
    /// its own executor therefore goes to sleep and stays asleep; each wake-up costs one extra pass
    /// to deliver the batch. A consumer on another thread gets every event as it happens.
    ///
    /// - Parameters:
    ///   - activities: The activities to report.
    ///   - modes: The modes to observe; defaults to `Loop.Mode.common`.
    ///   - buffering: The buffer size and drop policy; defaults to keeping the newest 1,024.
    /// - Important: Safe from any thread. Iterate from one task at a time (a second task waiting on
    ///   the same iterator traps). The stream also ends (after the events already buffered) when
    ///   the loop stops accepting work — its `LoopThread` begins shutting down, before the
    ///   thread's executors stop, or its thread exits.
    public func activities(
        _ activities: Activity = .allActivities,
        inModes modes: [Mode] = [.common],
        buffering: LoopBuffering = .dropOldest(capacity: 1024)
    ) -> LoopActivities {
        precondition(buffering.capacity > 0, "Loop.activities: the buffer capacity must be positive.")
        precondition(!modes.isEmpty, "Loop.activities: the mode list is empty, so nothing would be observed.")
        return LoopActivities(loop: self, activities: activities, modes: modes, buffering: buffering)
    }
}

/// The activities of a loop as an async sequence; see
/// `Loop.activities(_:inModes:buffering:)`.
///
/// - Important: Safe from any thread; each iterator belongs to one task. Two tasks waiting in
///   `next()` on one iterator at once is a programmer error and traps (the second would otherwise
///   replace the first, which would wait for ever).
public struct LoopActivities: AsyncSequence, Sendable {
    /// The element: a ``LoopActivityEvent``.
    public typealias Element = LoopActivityEvent

    let loop: Loop
    let activities: Loop.Activity
    let modes: [Loop.Mode]
    let buffering: LoopBuffering
    /// The observer added when the stream was made, for the first iterator.
    private let first: FirstIteratorMailbox<ActivityRing>

    init(loop: Loop, activities: Loop.Activity, modes: [Loop.Mode], buffering: LoopBuffering) {
        self.loop = loop
        self.activities = activities
        self.modes = modes
        self.buffering = buffering
        first = FirstIteratorMailbox(
            Self.startObserving(loop: loop, activities: activities, modes: modes, buffering: buffering))
    }

    /// An iterator over the events: the first one gets those since the stream was made, each
    /// later one those since it was made.
    public func makeAsyncIterator() -> Iterator {
        let mailbox =
            first.take()
            ?? Self.startObserving(loop: loop, activities: activities, modes: modes, buffering: buffering)
        return Iterator(MailboxHandle(mailbox))
    }

    /// Iterates the events; see ``LoopEventIterator``.
    public typealias Iterator = LoopEventIterator<LoopActivityEvent>

    /// A mailbox fed by a new observer (order `Int.max`) in the stream's modes.
    private static func startObserving(
        loop: Loop, activities requested: Loop.Activity, modes: [Loop.Mode], buffering: LoopBuffering
    ) -> Mailbox<ActivityRing> {
        let mailbox = Mailbox(
            on: loop, buffer: ActivityRing(buffering), name: "LoopActivities", noun: "activity stream",
            batchesOnLoopThread: true)
        // The observer runs only in this loop's callouts, so the loop is alive whenever it runs;
        // holding it strongly would make a cycle through the loop's observer tables. Unmanaged,
        // not `unowned(unsafe)`: each use of the latter retains and releases.
        let observedLoop = Unmanaged.passUnretained(loop)
        // `afterWaiting` and `exit` hand a batch to a consumer on the loop's thread (see
        // `Loop.activities(_:inModes:buffering:)`), so they are observed whatever was asked for.
        let observer = LoopObserver(recordingActivities: requested.union([.afterWaiting, .exit]), order: .max) {
            _, activity in
            let isBatchPoint = activity == .afterWaiting || activity == .exit
            guard requested.contains(activity) else {
                return mailbox.send(nil, isBatchPoint: isBatchPoint)
            }
            let (mode, depth, nanoseconds) = observedLoop._withUnsafeGuaranteedRef { $0.notification }
            let event = LoopActivityEvent(
                activity: activity, mode: mode, storedTime: StoredInstant(nanoseconds: nanoseconds), depth: depth,
                dropped: 0)
            mailbox.send(event, isBatchPoint: isBatchPoint)
        }
        mailbox.attach(
            start: { for mode in modes { loop.add(observer, forMode: mode) } }, detach: observer.invalidate)
        return mailbox
    }
}

/// What an activity stream keeps while its consumer is busy: a bounded ring that drops by the
/// stream's policy and counts what it dropped. Its memory grows with what is kept, up to the
/// capacity asked for: a stream made with a capacity of a million (or `Int.max`) costs what it
/// holds, not what it could.
struct ActivityRing: MailboxBuffer {
    /// `buffer[head..<head+count]` modulo `buffer.count` (plain values, no optionals: the slots
    /// outside the window hold stale events). `buffer.count` grows to `capacity` by doubling.
    private var buffer: [LoopActivityEvent] = []
    private var head = 0
    private var count = 0
    private var droppedSinceLast = 0
    private let policy: LoopBuffering
    private let capacity: Int

    init(_ policy: LoopBuffering) {
        self.policy = policy
        capacity = policy.capacity
    }

    mutating func append(_ event: LoopActivityEvent) {
        if count == capacity {
            droppedSinceLast += 1
            guard case .dropOldest = policy else { return }
            head = head + 1 == buffer.count ? 0 : head + 1
            count -= 1
        } else if count == buffer.count {
            grow(keeping: event)
        }
        let size = buffer.count
        let slot = head + count
        buffer[slot >= size ? slot - size : slot] = event
        count += 1
    }

    /// Makes room for more events (the ring is full below its capacity): the kept ones move to the
    /// front of a buffer twice the size, or the capacity if that is smaller. Off the common path.
    @inline(never)
    private mutating func grow(keeping placeholder: LoopActivityEvent) {
        let size = count == 0 ? min(capacity, 16) : min(capacity, count > capacity / 2 ? capacity : count * 2)
        var grown: [LoopActivityEvent] = []
        grown.reserveCapacity(size)
        for index in 0..<count { grown.append(buffer[(head + index) % buffer.count]) }
        while grown.count < size { grown.append(placeholder) }
        buffer = grown
        head = 0
    }

    /// The oldest event kept, stamped with the drops since the previous delivery.
    mutating func removeFirst() -> LoopActivityEvent? {
        guard count > 0 else { return nil }
        let event = buffer[head]
        head = head + 1 == buffer.count ? 0 : head + 1
        count -= 1
        defer { droppedSinceLast = 0 }
        return event.stamped(dropped: droppedSinceLast)
    }

    mutating func removeAll() {
        head = 0
        count = 0
    }

    /// Half full: a consumer on the loop's thread gets its batch now rather than risk drops.
    var wantsHandOff: Bool { count >= capacity - capacity / 2 }
}
