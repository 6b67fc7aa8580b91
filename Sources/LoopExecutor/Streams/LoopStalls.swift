import LoopRuntime

extension Loop {
    /// An async sequence of reports of callouts and passes that kept this loop's thread busy
    /// longer than `threshold`: a hang monitor that names the culprit.
    ///
    /// Each report (`Loop.Stall`) says how long the thread was busy, with what — the callout's
    /// kind and label (label timers, sources, observers, blocks and executors to get names) — in
    /// which mode and at which run depth. The loop measures on its own thread when the stretch
    /// ends and hands the report over without blocking; only the loop's own work counts, so a
    /// modal nested run is not a stall of the callout that started it. The innermost stretch is
    /// reported: a long callout, not also its pass; a pass of many shorter callouts names its
    /// longest.
    ///
    /// ```swift
    /// for await stall in loop.stalls(longerThan: .milliseconds(50)) {
    ///     log.warning("\(stall)")   // timer "autosave" ran 61.2 ms in default (depth 1)
    /// }
    /// ```
    ///
    /// The stall handler is registered when the stream is made, so the first iteration also gets
    /// the stalls between then and its first `next()` (a second iteration of the same stream value
    /// registers its own when it starts); while a handler is registered, every
    /// callout reads the clock after it returns (see `Loop.startRecordingMetrics()` for the cost).
    /// A report is measured after the stretch ended, so a callout that never returns is never
    /// reported: watch for that from another thread (a deadline on a ping to the loop).
    ///
    /// - Parameters:
    ///   - threshold: The busy time that counts as a stall; must be positive.
    ///   - buffering: What is kept for a consumer that falls behind: by default the newest 64
    ///     reports, older ones dropped first; the reports dropped are counted in the next delivered
    ///     report's `Loop.Stall/dropped`. The capacity must be positive.
    /// - Important: Safe from any thread. Iterate from one task at a time (a second task waiting
    ///   on the same iterator traps). The stream ends when the consuming task is cancelled or the
    ///   loop stops accepting work (its `LoopThread` begins shutting down, or its thread exits),
    ///   after the reports already buffered.
    public func stalls(
        longerThan threshold: Duration, buffering: LoopBuffering = .dropOldest(capacity: 64)
    ) -> LoopStalls {
        precondition(threshold > .zero, "Loop.stalls(longerThan:): the threshold must be positive, got \(threshold).")
        precondition(buffering.capacity > 0, "Loop.stalls(longerThan:): the buffer must hold at least one report.")
        return LoopStalls(loop: self, threshold: threshold, buffering: buffering)
    }
}

/// The stall reports of a loop as an async sequence; see `Loop.stalls(longerThan:buffering:)`.
///
/// - Important: Safe from any thread; each iterator belongs to one task. Two tasks waiting in
///   `next()` on one iterator at once is a programmer error and traps.
public struct LoopStalls: AsyncSequence, Sendable {
    /// The element: a `Loop.Stall` report.
    public typealias Element = Loop.Stall

    let loop: Loop
    let threshold: Duration
    let buffering: LoopBuffering
    /// The stall handler registered when the stream was made, for the first iterator.
    private let first: FirstIteratorMailbox<StallRing>

    init(loop: Loop, threshold: Duration, buffering: LoopBuffering) {
        self.loop = loop
        self.threshold = threshold
        self.buffering = buffering
        first = FirstIteratorMailbox(Self.startWatching(loop: loop, threshold: threshold, buffering: buffering))
    }

    /// An iterator over the reports: the first one gets those since the stream was made, each
    /// later one those since it was made.
    public func makeAsyncIterator() -> Iterator {
        let mailbox = first.take() ?? Self.startWatching(loop: loop, threshold: threshold, buffering: buffering)
        return Iterator(MailboxHandle(mailbox))
    }

    /// Iterates the reports; see ``LoopEventIterator``.
    public typealias Iterator = LoopEventIterator<Loop.Stall>

    private static func startWatching(loop: Loop, threshold: Duration, buffering: LoopBuffering) -> Mailbox<StallRing> {
        let mailbox = Mailbox(on: loop, buffer: StallRing(buffering), name: "LoopStalls", noun: "stall stream")
        // The handler's token, and whether the stream was detached before `start` stored it (a
        // cancellation racing the start): then `start` removes the handler itself.
        let registration = ExecutorLocked<(token: UInt64?, detached: Bool)>((nil, false))
        mailbox.attach(
            start: {
                guard let added = loop.addStallHandler(longerThan: threshold, { mailbox.send($0) }) else {
                    return mailbox.finish(drain: true)  // the loop ended in between
                }
                let detached = registration.withLock { state in
                    if !state.detached { state.token = added }
                    return state.detached
                }
                if detached { loop.removeStallHandler(added) }
            },
            detach: {
                let token = registration.withLock { state in
                    state.detached = true
                    return state.token.take()
                }
                if let token { loop.removeStallHandler(token) }
            })
        return mailbox
    }
}

/// The reports kept while a stall stream's consumer is busy: the newest or the oldest
/// `capacity`, with the count of those dropped.
struct StallRing: MailboxBuffer {
    private var reports: [Loop.Stall] = []
    private var droppedSinceLast = 0
    private let capacity: Int
    private let keepsNewest: Bool

    init(_ buffering: LoopBuffering) {
        capacity = buffering.capacity
        if case .dropOldest = buffering { keepsNewest = true } else { keepsNewest = false }
    }

    mutating func append(_ report: Loop.Stall) {
        if reports.count == capacity {
            droppedSinceLast += 1
            guard keepsNewest else { return }
            reports.removeFirst()
        }
        reports.append(report)
    }

    mutating func removeFirst() -> Loop.Stall? {
        guard !reports.isEmpty else { return nil }
        var report = reports.removeFirst()
        report.dropped = droppedSinceLast
        droppedSinceLast = 0
        return report
    }

    mutating func removeAll() {
        reports.removeAll()
    }
}
