import Synchronization

/// The queue through which an executor hands its jobs to a loop (SPEC N1–N4). Support for the
/// `LoopExecutor` module; not meant to be used directly.
///
/// Jobs are plain `UnownedJob` pointers in a reusable buffer: no allocation per job in the steady
/// state. The loop runs them in step 4 of a pass whose mode is one of the queue's modes, in enqueue
/// order; one pass runs the jobs queued when the step began (N2); a nested run started by a job
/// does not run this queue (N3); a queue with jobs keeps its modes alive (N4).
///
/// Wake-ups: before the loop blocks in a mode the queue can run in, it raises the queue's
/// `loopSleepsInMyMode` flag and then checks the queue. An enqueue appends and then reads the flag;
/// only an enqueue into an empty queue of a loop sleeping in one of the queue's modes notifies the
/// loop (at most one eventfd write per idle→busy transition, SPEC M2). An enqueue while the loop
/// is awake costs a lock, an append and one atomic load.
///
/// - Important: Safe from any thread.
package final class LoopJobQueue: @unchecked Sendable {  // buffers guarded by `lock`; see below
    // Thread-safety: `loop`, `modes` and `label` are immutable; `pending`, `pendingTimes`, `spare`,
    // `closedReason` and `keeper` are guarded by `lock`; `timesJobs` is an atomic written under the
    // loop's lock; `runJob` is read on the loop's thread and cleared under `lock`
    // at close, after which the loop never runs the queue; `isRunningBatch` is touched only on the
    // loop's thread; `loopSleepsInMyMode` is an atomic written by the loop under its own lock.

    /// The loop the jobs run on.
    package let loop: Loop
    /// The modes in which the jobs may run (``Loop/Mode/common``: every common mode).
    package let modes: [Loop.Mode]
    /// The name of the jobs' callouts in metrics, stall reports and traces, if any.
    package let label: StaticString?
    /// Cleared when the queue closes, which breaks the executor ↔ queue reference cycle.
    @exclusivity(unchecked) private var runJob: (@Sendable (UnownedJob) -> Void)?
    private let lock = LoopLock()
    /// The jobs queued, in order, from `head` on; guarded by `lock`.
    @exclusivity(unchecked) private var pending: [UnownedJob] = []
    /// How many jobs at the front of `pending` have already left it (run, or moved to another
    /// queue): always 0 in a queue that is not stealable, whose batches take `pending` whole.
    /// Guarded by `lock`.
    @exclusivity(unchecked) private var head = 0
    /// The buffer of the last batch, kept for reuse (no allocation per batch); guarded by `lock`.
    @exclusivity(unchecked) private var spare: [UnownedJob] = []
    /// Enqueue times (loop time) of the last `pendingTimes.count` jobs of `pending`, taken while
    /// the loop records metrics (job latency); emptied by an enqueue while it does not.
    @exclusivity(unchecked) private var pendingTimes: [Int64] = []
    /// Why the queue refuses jobs (the loop ended), or `nil` while it accepts them.
    @exclusivity(unchecked) private var closedReason: String?
    /// The owner of the jobs (the executor), kept alive while jobs are queued: a job must never
    /// find its executor gone, yet an idle executor must be free to go when nothing holds it.
    @exclusivity(unchecked) private var keeper: AnyObject?
    /// The queue's batch is running (SPEC N3). Loop thread only.
    @exclusivity(unchecked) var isRunningBatch = false
    let loopSleepsInMyMode = Atomic<Bool>(false)
    /// The loop records metrics: enqueues note the time (job latency). A mirror of the loop's
    /// metrics flag, written under the loop's lock, so that an enqueue reads only the queue's own
    /// memory (the loop's flags share a cache line with what the loop thread writes per callout).
    let timesJobs = Atomic<Bool>(false)
    /// Whether other queues may take this queue's oldest jobs (``moveOldest(upTo:to:)``). A
    /// stealable queue's pass takes its jobs one at a time from the front, so that every job not
    /// yet started stays in the queue, where another loop can take it.
    package let isStealable: Bool

    /// Creates a queue on `loop` for `modes` and registers it with the loop.
    ///
    /// - Parameters:
    ///   - loop: The loop that will run the jobs.
    ///   - modes: The modes the jobs may run in; must not be empty.
    ///   - label: The name of the jobs' callouts in stall reports and traces.
    ///   - stealable: Whether other queues may take its oldest jobs (a group of loops that share
    ///     work); a pass then takes one job at a time, a lock each.
    ///   - runJob: Runs one job; called on the loop's thread.
    package init(
        loop: Loop, modes: [Loop.Mode], label: StaticString? = nil, stealable: Bool = false,
        runJob: @escaping @Sendable (UnownedJob) -> Void
    ) {
        precondition(!modes.isEmpty, "LoopExecutor: the mode list must not be empty (on the \(loop)).")
        self.loop = loop
        self.modes = modes
        self.label = label
        self.isStealable = stealable
        self.runJob = runJob
        pending.reserveCapacity(64)
        spare.reserveCapacity(64)
        loop.addJobQueue(self)
    }

    /// Queues `job`, keeping `owner` alive until the queue is empty again. Traps if the loop has
    /// ended: the job could never run, and its task would stay suspended forever (see the
    /// executor's shutdown policy).
    package func enqueue(_ job: UnownedJob, keeping owner: AnyObject? = nil) {
        let timed = timesJobs.load(ordering: .relaxed)
        let enqueuedAt = timed ? loop.waiter.now() : 0
        let wasEmpty: Bool = lock.withLock {
            if let closedReason {
                fatalError(
                    "LoopExecutor: a job was enqueued after \(closedReason). Nothing would ever run it and its task would stay suspended forever. Let the actors and tasks that use a LoopThread's executor finish before you shut it down (the shutdown runs every job enqueued before it ends, and resumes the loop's sleeps, ticks and activity streams), or keep the thread until then."
                )
            }
            pending.append(job)
            if timed {
                pendingTimes.append(enqueuedAt)
            } else if !pendingTimes.isEmpty {
                pendingTimes.removeAll()
            }
            guard pending.count - head == 1 else { return false }
            if keeper == nil { keeper = owner }
            return true
        }
        if wasEmpty && loopSleepsInMyMode.load(ordering: .sequentiallyConsistent) {
            loop.notifyLoop()
        }
    }

    /// Queues `jobs` in order, keeping `owner` alive until the queue is empty again (see
    /// ``enqueue(_:keeping:)``).
    /// Returns false, queueing nothing, if the queue is closed.
    package func enqueue(contentsOf jobs: [UnownedJob], keeping owner: AnyObject?) -> Bool {
        let wasEmpty: Bool? = lock.withLock {
            guard closedReason == nil else { return nil }
            let waiting = pending.count - head
            pending.append(contentsOf: jobs)
            if !pendingTimes.isEmpty { pendingTimes.removeAll() }  // moved jobs are not timed
            guard waiting == 0 else { return false }
            if keeper == nil { keeper = owner }
            return true
        }
        guard let wasEmpty else { return false }
        if wasEmpty && loopSleepsInMyMode.load(ordering: .sequentiallyConsistent) {
            loop.notifyLoop()
        }
        return true
    }

    /// Puts back `jobs`, taken from the front by `moveOldest`, at the front, in order.
    private func putBack(_ jobs: [UnownedJob], keeping owner: AnyObject?) {
        let refusal: String? = lock.withLock {
            if let closedReason { return closedReason }
            if head >= jobs.count {
                head -= jobs.count
                pending.replaceSubrange(head..<(head + jobs.count), with: jobs)
            } else {
                pending.insert(contentsOf: jobs, at: head)
            }
            if keeper == nil { keeper = owner }
            return nil
        }
        if let refusal {
            fatalError(
                "LoopExecutor: \(jobs.count) jobs could not move to another loop, and their own loop's queue closed meanwhile (\(refusal)). Nothing would ever run them: shut a group of loops down only when no work is queued on it."
            )
        }
    }

    /// Moves up to `maximum` of this stealable queue's oldest jobs, in order, to the end of
    /// `target` (a queue of another loop, which will run them); returns how many moved. The jobs
    /// keep their owner alive in `target` before this queue lets go of it. A closed queue (or
    /// either) moves nothing.
    ///
    /// - Important: Safe from any thread; call it from `target`'s loop thread, between callouts.
    package func moveOldest(upTo maximum: Int, to target: LoopJobQueue) -> Int {
        precondition(isStealable, "LoopJobQueue: only a stealable queue gives its jobs to another.")
        precondition(target !== self, "LoopJobQueue: a queue cannot take its own jobs.")
        let (jobs, owner): ([UnownedJob], AnyObject?) = lock.withLock {
            let waiting = pending.count - head
            guard closedReason == nil, waiting > 0, maximum > 0 else { return ([], nil) }
            let count = Swift.min(maximum, waiting)
            let jobs = Array(pending[head..<(head + count)])
            head += count
            let owner = keeper
            compactLocked()
            if pending.count == head { keeper = nil }
            return (jobs, owner)
        }
        guard !jobs.isEmpty else { return 0 }
        // The target's loop is ending (its queue closed): the jobs stay here.
        let moved = target.enqueue(contentsOf: jobs, keeping: owner)
        if !moved { putBack(jobs, keeping: owner) }
        _ = owner  // released after a queue holds it again: it may be the jobs' executor's last reference
        return moved ? jobs.count : 0
    }

    /// Drops the front of `pending` that has left it once that is worth the copy (a stealable
    /// queue); with the lock held.
    private func compactLocked() {
        if head == pending.count {
            pending.removeAll(keepingCapacity: true)
            pendingTimes.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= pending.count {
            let timedFrom = pending.count - pendingTimes.count
            if head > timedFrom { pendingTimes.removeFirst(head - timedFrom) }
            pending.removeFirst(head)
            head = 0
        }
    }

    /// The number of jobs waiting.
    package var count: Int { lock.withLock { pending.count - head } }

    /// True if the jobs may run in `mode`.
    @inline(__always)
    func matches(_ mode: ModeState) -> Bool {
        for target in modes where target == mode.mode || (mode.isCommon && target == .common) {
            return true
        }
        return false
    }

    /// Step 4: runs the jobs queued now, in order (SPEC N1, N2). Returns true if any ran.
    func runBatch() -> Bool {
        if isStealable { return runOneByOne() }
        let (taken, times): ([UnownedJob], [Int64]) = lock.withLock {
            guard !pending.isEmpty, closedReason == nil else { return ([], []) }
            let batch = pending
            pending = spare
            spare = []
            var times: [Int64] = []
            if !pendingTimes.isEmpty { swap(&times, &pendingTimes) }
            return (batch, times)
        }
        var batch = taken
        guard !batch.isEmpty else { return false }
        runAsBatch { run in
            // The jobs with an enqueue time are the last `times.count`.
            let untimed = batch.count - times.count
            for index in batch.indices {
                run(batch[index], index >= untimed ? times[index - untimed] : nil)
            }
            return batch.count
        }
        batch.removeAll(keepingCapacity: true)
        let released: AnyObject? = lock.withLock {
            if spare.capacity < batch.capacity { spare = batch }
            guard pending.isEmpty else { return nil }
            defer { keeper = nil }
            return keeper
        }
        _ = released  // released after unlocking: it may be the executor's last reference
        return true
    }

    /// Runs `body` as this queue's batch, on the loop's thread: meanwhile the queue is marked
    /// running and is the loop's running job queue (the outer one is put back after), and the
    /// instruments record the batch and each job. `body` runs each job through `run(job,
    /// enqueuedAt)` and returns how many it ran.
    @inline(__always)
    private func runAsBatch(_ body: (_ run: (UnownedJob, _ enqueuedAt: Int64?) -> Void) -> Int) {
        isRunningBatch = true
        let outerQueue = loop.confined.runningJobQueue
        // Unretained: this queue is alive for the whole batch (the caller holds it), and the outer
        // value is put back before it returns.
        loop.confined.runningJobQueue = Unmanaged.passUnretained(self)
        let runJob = self.runJob!
        let recordsBatch = loop.isInstrumented
        if recordsBatch { loop.instrumentJobBatchBegan() }
        let ran = body { job, enqueuedAt in
            let recorded =
                recordsBatch
                && loop.instrumentCalloutBegins(
                    .job, label: label, lateness: enqueuedAt.map { loop.confined.now(loop.waiter) - $0 })
            runJob(job)
            if recorded { loop.instrumentCalloutEnded() }
        }
        if recordsBatch { loop.instrumentJobBatchEnded(jobs: ran, label: label) }
        loop.confined.runningJobQueue = outerQueue
        isRunningBatch = false
    }

    /// `runBatch` for a stealable queue: the jobs waiting when the step began (N2), taken one at a
    /// time from the front, so that those not yet started can still move to another loop.
    private func runOneByOne() -> Bool {
        var remaining = lock.withLock { closedReason == nil ? pending.count - head : 0 }
        guard remaining > 0 else { return false }
        var ran = 0
        runAsBatch { run in
            while remaining > 0 {
                remaining -= 1
                let next: (job: UnownedJob, enqueuedAt: Int64?)? = lock.withLock {
                    guard closedReason == nil, head < pending.count else { return nil }
                    let index = head
                    let timedFrom = pending.count - pendingTimes.count
                    let time = index >= timedFrom ? pendingTimes[index - timedFrom] : nil
                    let job = pending[index]
                    head += 1
                    compactLocked()
                    return (job, time)
                }
                guard let next else { break }
                run(next.job, next.enqueuedAt)
                ran += 1
            }
            return ran
        }
        let released: AnyObject? = lock.withLock {
            guard pending.count == head else { return nil }
            defer { keeper = nil }
            return keeper
        }
        _ = released  // released after unlocking: it may be the executor's last reference
        return ran > 0
    }

    /// Closes the queue and removes it from its loop: its executor is gone (and had no jobs, since
    /// queued jobs keep it alive).
    package func retire() {
        close(reason: "its executor was released")
        loop.removeJobQueue(self)
    }

    /// Refuses further jobs, naming `reason` in the message of a late enqueue, and drops the
    /// references that only the running loop needs.
    func close(reason: String) {
        let released: (AnyObject?, Any?) = lock.withLock { closeLocked(reason: reason) }
        _ = released  // released after unlocking (see `keeper`)
    }

    /// `close(reason:)` with the lock held; returns what to release after unlocking.
    private func closeLocked(reason: String) -> (AnyObject?, Any?) {
        if closedReason == nil { closedReason = reason }
        defer {
            runJob = nil
            keeper = nil
        }
        return (keeper, runJob)
    }
}

extension LoopJobQueue: LoopEndAware {
    var hasQueuedWork: Bool { lock.withLock { pending.count > head } }

    /// The loop is sealing: close if no job is queued and the rest agree. An idle queue holds no
    /// keeper, and `runJob` holds its executor unowned, so nothing released here runs user code.
    func sealIfIdle(_ end: LoopEndNotice, rest: () -> Bool) -> Bool {
        let released: (AnyObject?, Any?)? = lock.withLock {
            guard pending.count == head, rest() else { return nil }
            return closeLocked(reason: end.message)
        }
        _ = released
        return released != nil
    }

    /// The loop ended: refuse further jobs (queued ones will never run).
    func loopEnded(_ end: LoopEndNotice) {
        close(reason: end.message)
    }
}

extension Loop {
    /// Registers a job queue (called by its initializer). Lock order: loop lock, then queue lock.
    func addJobQueue(_ queue: LoopJobQueue) {
        let endedBecause = lock.withLock { () -> String? in
            if let reason = state.lifecycle.reason, state.lifecycle.isEnded {
                return "the \(self) has ended: \(reason.explanation)"
            }
            state.jobQueues.append(queue)
            queue.timesJobs.store(
                instrumentFlags.load(ordering: .relaxed) & InstrumentFlags.metrics != 0, ordering: .relaxed)
            // A loop already asleep in one of the queue's modes must hear of its first job.
            if let sleeping = state.sleepingMode, queue.matches(sleeping) {
                queue.loopSleepsInMyMode.store(true, ordering: .sequentiallyConsistent)
            }
            for mode in queue.modes where mode != .common {
                _ = state.modeState(mode)  // SPEC R4
            }
            return nil
        }
        if let endedBecause { queue.close(reason: endedBecause) }
    }

    func removeJobQueue(_ queue: LoopJobQueue) {
        lock.withLock { state.jobQueues.removeAll { $0 === queue } }
    }

    /// Step 4, second half: run the executor jobs of the mode (SPEC N1–N3).
    @inline(__always)
    func runExecutorJobs(_ run: RunContext) -> Bool {
        // The list is copied under the lock only when a queue was registered or removed since.
        let version = state.jobQueuesVersion.load(ordering: .acquiring)
        // No call when the loop has no executor (and none came or went).
        if version == confined.jobQueuesVersion && confined.jobQueues.isEmpty { return false }
        return runExecutorJobs(run, version: version)
    }

    @inline(never)
    private func runExecutorJobs(_ run: RunContext, version: UInt64) -> Bool {
        if version != confined.jobQueuesVersion {
            confined.jobQueues = lock.withLock { state.jobQueues }
            confined.jobQueuesVersion = version
        }
        let queues = confined.jobQueues
        guard !queues.isEmpty else { return false }
        var handled = false
        for queue in queues where !queue.isRunningBatch && queue.matches(run.mode) {
            if queue.runBatch() { handled = true }
        }
        if handled { confined.timePassed() }
        return handled
    }
}
