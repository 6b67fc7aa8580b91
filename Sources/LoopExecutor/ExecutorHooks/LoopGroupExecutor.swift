// A default executor on a group of loop threads (ExperimentalExecutorHooks trait).
#if ExperimentalExecutorHooks && compiler(>=6.3)
    @_spi(ExperimentalScheduling) import _Concurrency
    import LoopRuntime
    import Synchronization

    #if canImport(Glibc)
        import Glibc
    #endif

    /// A task executor that spreads its jobs over the loops of a `LoopThreadGroup`: installed as
    /// the process's default executor (``LoopExecutorFactory``), it runs every task that has no
    /// actor or executor of its own — `Task { }` outside an actor, `Task.detached`, task-group
    /// children, nonisolated async code — on loop threads, and their `Task.sleep`s on loop timers.
    ///
    /// A job enqueued on one of the group's threads goes to that thread's loop, as in an event
    /// loop group: a task and the tasks it talks to keep to one thread, with no wake-up of
    /// another, and a burst of new tasks — a task group's children — waits there in the order it
    /// came. Loops share that work by stealing the oldest: a loop that runs out of jobs spins for
    /// up to 50 µs before it blocks, and while it spins it takes half of the waiting jobs (the
    /// oldest, at most 64) of a loop that has jobs waiting and has started none for 20 µs — one
    /// busy with a long job. A loop that queues a second job for itself while another loop of the
    /// group is blocked in the kernel wakes that loop, so that it can take some, and a loop that
    /// blocks while another runs with jobs waiting looks again within 1 ms. So a long
    /// CPU-bound job holds up no one for more than about 20 µs (1 ms at worst) while another loop
    /// is free, and children of one group finish in about the order they were created (the
    /// runtime's task-group bookkeeping is cheapest that way). A job from any other thread (the main thread, a
    /// `LoopThread` of your own, a pinned actor's loop) goes to a loop that is not blocked in the
    /// kernel and has fewer than 16 jobs waiting, round-robin, so an answer that comes back
    /// quickly — from an actor pinned to a `LoopThread`, say — finds its loop still running, not
    /// asleep. Jobs run in each loop's common modes (a `LoopThread` runs its default mode), in
    /// the order they came: job priorities are not used. A delayed job (`Task.sleep`) waits in a
    /// timer of the same loop its job would go to; cancellation and the loop's end are handled as
    /// on a `LoopExecutor` (see its `enqueue(_:at:tolerance:clock:)`). A loop held by a long job
    /// cannot fire its timers: another loop of the group takes its delayed jobs once they are
    /// 100 µs overdue (`timerStealAfter`), a spinning one or one that set a timer for them before
    /// it blocked. A job from another thread that lands on a loop busy with a long job is taken by
    /// another loop of the group within about 10 ms.
    ///
    /// Part of Swift's experimental executor SPI (ExperimentalExecutorHooks trait), which may change
    /// in any toolchain.
    ///
    /// - Important: Safe from any thread. Jobs run on the group's threads.
    public final class LoopGroupExecutor: TaskExecutor, @unchecked Sendable,
        CustomStringConvertible
    {
        // Thread-safety: `group` and `lanes` are immutable after init; `cursor` is atomic; each
        // lane's queue and delayed jobs synchronize themselves.

        /// One loop of the group: its job queue, its delayed jobs, and how many of its jobs wait.
        final class Lane: Sendable {
            let loop: Loop
            /// The token of the loop's thread (`Loop.threadToken`): the calling thread's lane is
            /// the one whose token is `Loop.currentThreadToken`.
            let threadToken: UInt64
            let load: LaneLoad
            let queue: LoopJobQueue
            let delayedJobs: DelayedJobs
            // Set once in the group's init, before the executor is shared.
            /// Spins before the loop blocks (see `spinBeforeWaiting`) and tracks `load.blocked`.
            nonisolated(unsafe) var spinner: LoopObserver!
            /// Wakes this loop, blocked in the kernel, when a delayed job of another lane that is
            /// running may be overdue there, to take it (see `timerStealAfter`). Repeating, so that
            /// it can be moved again after it fired; its interval is never reached. Its date, in
            /// loop time, is `watchAt`.
            nonisolated(unsafe) var watch: LoopTimer!
            /// When the watch fires, in loop time (`Int64.max`: not set), changed together with the
            /// timer (see `LaneDirectory.move`): by the lane itself before it blocks, by a running
            /// lane that makes it its deputy, and by the watch when it fires. Nothing runs user
            /// code under this lock; it is taken before the timer's own locks.
            let watchAt = ExecutorLocked<Int64>(.max)
            /// `watchAt`, written with it under its lock, for a lane that only needs to know
            /// whether this watch fires by some time (`watchForOutsideJob`) without the lock.
            let watchSoonest = Atomic<Int64>(.max)
            /// The lane whose watch this lane set for its own delayed jobs while it runs, and the
            /// date it set: put back when this lane blocks (it then fires its own timers). Touched
            /// only on this lane's loop thread.
            nonisolated(unsafe) var deputy: Lane?
            nonisolated(unsafe) var deputyAt = Int64.max
            /// The spinner's record of the other lanes: each one's `load.ran` when last seen to
            /// change, and when. Touched only on this lane's loop thread.
            nonisolated(unsafe) var seenRan: [Int] = []
            nonisolated(unsafe) var seenAt: [ContinuousClock.Instant] = []
            /// The record is this lane's own since it last blocked: a lane it saw stuck then and
            /// sees stuck now has been stuck all along. Loop thread only.
            nonisolated(unsafe) var recordIsFresh = false
            init(loop: Loop, load: LaneLoad, queue: LoopJobQueue, delayedJobs: DelayedJobs) {
                self.loop = loop
                self.threadToken = loop.threadToken
                self.load = load
                self.queue = queue
                self.delayedJobs = delayedJobs
            }
        }

        /// How busy a lane's loop is: shared by the lane, its job runner and its spinner, which
        /// hold it strongly (the spinner may still be finishing a callout on its loop's thread
        /// while the executor goes away).
        ///
        /// `blocked` has a cache line of its own: the counters change with every job this lane
        /// runs, the flag only when the loop blocks or wakes, and every other lane reads the flag
        /// for each job it queues (Swift lays a class's stored properties out in order today, though
        /// it does not promise to; the padding keeps 128 bytes on either side of the flag).
        final class LaneLoad: Sendable {
            /// Jobs queued and not yet run: enqueue adds, the loop's runner subtracts. Read by
            /// enqueues on this lane's thread to decide whether to keep a job local.
            let depth = Atomic<Int>(0)
            /// Jobs started: the runner adds one per job. A lane whose count stays put while jobs
            /// wait there is running a long job; the others' spinners take its waiting jobs.
            let ran = Atomic<Int>(0)
            private let before = CacheLinePadding()
            /// The loop is blocked in the kernel (or about to be): a job sent here from outside the
            /// group would have to wake its thread. Written by the loop's spinner, and cleared by
            /// the lane that wakes it.
            let blocked = Atomic<Bool>(false)
            /// The loop is spinning before it waits (see `spinBeforeWaiting`): a job queued here
            /// now starts within a microsecond. Written by the loop's spinner.
            let spinning = Atomic<Bool>(false)
            private let after = CacheLinePadding()
        }

        /// 128 bytes that keep a field off its neighbours' cache line, and off the line the
        /// processor fetches with it (adjacent-line prefetch pairs 64-byte lines).
        struct CacheLinePadding: Sendable {
            private let words: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)
            private let more: (Int, Int, Int, Int, Int, Int, Int, Int) = (0, 0, 0, 0, 0, 0, 0, 0)
        }

        /// How long a group loop that runs out of jobs keeps looking for the next one before it
        /// blocks in the kernel. A task that just sent work to another thread (an actor pinned to
        /// a `LoopThread`, say) usually gets its answer within this window, and then its loop is
        /// still running: the answer costs an eventfd write, not a wake-up of a sleeping thread
        /// (tens of microseconds here). Costs at most this much CPU each time a loop goes idle.
        static let spinBeforeWaiting: Duration = .microseconds(50)

        /// A job from outside the group prefers a loop that is not blocked and has fewer than this
        /// many jobs waiting.
        static let localQueueLimit = 16

        /// A loop that queues a job for itself while one waits there already wakes one of the group's
        /// loops that is blocked in the kernel, whose spin then watches whether the busy loop keeps
        /// starting jobs.
        static let stealThreshold = 2
        /// A loop that has jobs waiting and has started none for this long is running a long job:
        /// a spinning loop of the group takes half of its waiting jobs (the oldest, at most
        /// `stealLimit`). Short enough that a burst of new tasks — a task group's children, queued
        /// by their parent — spreads over the group; long enough that tasks that talk to each other
        /// (jobs that run in a few microseconds) stay on one thread.
        static let stuckAfter: Duration = .microseconds(20)
        static let stealLimit = 64
        /// A delayed job this long overdue on a loop that is running — busy with a long job, its
        /// timers cannot fire — is taken by another loop of the group that is free: a spinning
        /// one, or one that saw the busy loop stuck before it blocked and set its watch for the
        /// job's deadline plus this. Long enough that a loop finishing a short job fires its own
        /// timers; far under the lateness of a sleep on a busy pool.
        static let timerStealAfter: Duration = .microseconds(100)
        static let timerStealAfterNanoseconds = Int64(timerStealAfter / .nanoseconds(1))
        /// How often at most a blocked loop wakes to look at the delayed jobs of a loop that runs
        /// short jobs: if one of those becomes a long job, its loop's timers are taken this late.
        static let timerRecheck: Duration = .milliseconds(1)
        static let timerRecheckNanoseconds = Int64(timerRecheck / .nanoseconds(1))
        /// How soon at the earliest a running lane's deputy wakes for it: the lane usually fires its
        /// own timers and blocks well within this (putting the deputy's watch back), even on a
        /// loaded machine, so that sleeps on an idle group wake one thread; a sleep on a lane held
        /// by a long job is taken this late at worst when no other loop of the group is awake.
        static let deputyHorizon: Duration = .milliseconds(10)
        static let deputyHorizonNanoseconds = Int64(deputyHorizon / .nanoseconds(1))
        /// For the checks: microseconds a loop that is about to block waits between raising its
        /// flag and looking at the other loops, and again between that look and setting its watch,
        /// to widen the windows in which a lane that queues work could miss it, or a deputy's
        /// watch could be lost (0: no pause).
        package static let pauseBeforeLook = Atomic<UInt32>(0)
        /// Where a watch waits when it is put away.
        static var never: ContinuousClock.Instant { .now + .seconds(86_400 * 365) }

        /// The threads whose loops run the jobs.
        public let group: LoopThreadGroup
        private var lanes: [Lane] = []
        /// `lanes` unretained, for the paths every job takes (`enqueue`): a retain and a release
        /// of a lane per job would be atomic writes to a cache line every loop of the group reads.
        /// Each is kept alive by `lanes` for the executor's life; the buffer is freed in `deinit`.
        private var laneRefs = UnsafeMutableBufferPointer<Unmanaged<Lane>>(start: nil, count: 0)
        private var directory: LaneDirectory!
        private let cursor = Atomic<Int>(0)

        /// An executor over the loops of `group`. The group must outlive the jobs handed to it: shut
        /// it down only when nothing runs on this executor any more.
        ///
        /// - Important: Safe from any thread.
        public init(group: LoopThreadGroup) {
            self.group = group
            lanes = group.threads.map { thread in
                let loop = thread.loop
                let load = LaneLoad()
                // Jobs run as the stock global executor runs them: on the generic serial executor
                // with the task's own preference (see `genericSerialExecutor`). The queue keeps its
                // executor alive while it has jobs (`keeping:`), so nothing here needs `self`.
                // Stealable: a loop that runs out of jobs takes the oldest waiting on a busier one.
                let queue = LoopJobQueue(
                    loop: loop, modes: [.common], label: "default executor", stealable: true
                ) { job in
                    load.depth.subtract(1, ordering: .relaxed)
                    load.ran.add(1, ordering: .relaxed)
                    job.runSynchronously(on: genericSerialExecutor)
                }
                // Unowned(unsafe) like the runner: a delayed job keeps the executor alive until it
                // fires or is dropped (`keeping:` in `schedule`).
                let delayedJobs = DelayedJobs(loop: loop, modes: [.common], stealable: true) {
                    [unowned(unsafe) self] job in
                    load.depth.add(1, ordering: .relaxed)
                    queue.enqueue(job, keeping: self)
                }
                return Lane(loop: loop, load: load, queue: queue, delayedJobs: delayedJobs)
            }
            laneRefs = .allocate(capacity: lanes.count)
            _ = laneRefs.initialize(from: lanes.map { Unmanaged.passUnretained($0) })
            let directory = LaneDirectory(lanes)
            self.directory = directory
            for lane in lanes {
                // The spinner holds its lane and the directory unowned: an observer keeps its
                // handler after it is invalidated, so strong captures would make a cycle (lane →
                // spinner → handler → lane) and every lane, queue and table would outlive the
                // executor. `deinit` invalidates the spinner before it lets go of them, and the
                // callout gate makes that wait for a spin under way on the loop's thread: the
                // handler never runs without them (a mistake here traps). `load` and `loop` hold
                // nothing of the executor.
                let load = lane.load
                let loop = lane.loop
                // Unowned: the timer keeps its handler after it is invalidated, so a strong capture
                // would be a cycle; and `weak` would give the lane and the directory side tables,
                // which make every retain of them slow. `deinit` invalidates the watch before it
                // lets go of either, and the callout gate makes that wait for a firing under way on
                // the loop's thread: the handler never runs without them (a mistake here traps).
                lane.watch = LoopTimer(fireAt: Self.never, interval: .seconds(86_400 * 365)) {
                    [unowned directory, unowned lane] _ in
                    let (directory, lane) = (directory, lane)  // strong for the whole handler
                    lane.watchAt.withLock { current in
                        current = .max
                        lane.watchSoonest.store(.max, ordering: .relaxed)
                    }
                    // The spin before the next wait runs as after any wake-up: whoever else woke
                    // this loop (a lane with jobs to share) may be what it finds.
                    // A lane that has started no job since this loop last looked (before it
                    // blocked) is stuck: its waiting jobs come here too.
                    let now = ContinuousClock.now
                    if !directory.stealOverdue(into: lane, at: now.loopNanoseconds) {
                        _ = directory.stealFromStuck(into: lane, at: now)
                    }
                }
                lane.loop.add(lane.watch, forMode: .common)
                lane.spinner = LoopObserver(
                    activities: [.beforeWaiting, .afterWaiting], label: "default executor spin"
                ) { [unowned directory, unowned lane] _, activity in
                    let (directory, lane) = (directory, lane)  // strong for the whole callout
                    guard activity == .beforeWaiting else {
                        // Sequentially consistent, as the store that raised it: a lane about to
                        // block looks at this flag after its own fence (see `setWatch`).
                        load.blocked.store(false, ordering: .sequentiallyConsistent)
                        directory.appointDeputy(for: lane, now: ContinuousClock.now.loopNanoseconds)
                        return
                    }
                    // Never past the loop's next timer: the spin must not make a timer late.
                    var now = ContinuousClock.now
                    var deadline = now + Self.spinBeforeWaiting
                    if let mode = loop.currentMode, let next = loop.nextFireDate(forMode: mode), next < deadline {
                        deadline = next
                    }
                    load.spinning.store(true, ordering: .relaxed)
                    defer { load.spinning.store(false, ordering: .relaxed) }
                    directory.beginWatch(by: lane, at: now)
                    if directory.stealOverdue(into: lane, at: now.loopNanoseconds) { return }
                    var rounds = 0
                    while load.depth.load(ordering: .relaxed) == 0 && now < deadline {
                        rounds &+= 1
                        now = ContinuousClock.now
                        if rounds & 15 == 0
                            && (directory.stealFromStuck(into: lane, at: now)
                                || directory.stealOverdue(into: lane, at: now.loopNanoseconds))
                        {
                            return
                        }
                    }
                    guard load.depth.load(ordering: .relaxed) == 0 else { return }
                    // This loop fires its own timers from now; it watches the running lanes'.
                    directory.releaseDeputy(of: lane)
                    // Its watch starts over before the flag: a running lane that sees the flag and
                    // makes it its deputy from now on only moves it sooner, and so does the look.
                    directory.putAwayWatch(of: lane)
                    // Blocked first, then the look at the others (a fence between): a lane that
                    // queues a second job, or schedules a sleep, either sees the flag — and wakes
                    // this loop, or makes it its deputy — or has done so before the look, which
                    // then sees its job or its sleep. Looking first left a window in which a lane
                    // queued both children of a task group, saw no loop blocked, ran the first
                    // for seconds, and this loop slept with the second one stuck behind it.
                    load.blocked.store(true, ordering: .sequentiallyConsistent)
                    lane.recordIsFresh = false
                    atomicMemoryFence(ordering: .sequentiallyConsistent)
                    let pause = Self.pauseBeforeLook.load(ordering: .relaxed)
                    if pause > 0 { usleep(pause) }
                    directory.setWatch(of: lane, at: now)
                }
                lane.loop.add(lane.spinner, forMode: .common)
            }
        }

        deinit {
            for lane in lanes {
                lane.spinner.invalidate()
                lane.watch.invalidate()
                lane.queue.retire()
            }
            laneRefs.deinitialize()
            laneRefs.deallocate()
        }

        /// `LoopGroupExecutor(<n> loops)`.
        public var description: String { "LoopGroupExecutor(\(lanes.count) loops)" }

        /// The number of jobs waiting to run, over all the group's loops.
        ///
        /// - Important: Safe from any thread.
        public var pendingJobCount: Int { lanes.reduce(0) { $0 + $1.queue.count } }

        /// The number of jobs waiting in loop timers for their time, over all the group's loops.
        ///
        /// - Important: Safe from any thread.
        public var delayedJobCount: Int { lanes.reduce(0) { $0 + $1.delayedJobs.count } }

        /// Queues `job` on the calling thread's loop if it is one of the group's, else on the next
        /// loop of the group (round-robin).
        ///
        /// - Precondition: the group's threads have not ended.
        /// - Important: Safe from any thread.
        public func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            var returning: (jobs: DelayedJobs, keepAlive: AnyObject & Sendable)?
            let token = Loop.currentThreadToken
            var local: Unmanaged<Lane>?
            for ref in laneRefs {
                ref._withUnsafeGuaranteedRef { lane in
                    if lane.threadToken == token { local = ref }
                    if let keepAlive = lane.delayedJobs.noteEnqueue(job) { returning = (lane.delayedJobs, keepAlive) }
                }
            }
            (local ?? laneFromOutside())._withUnsafeGuaranteedRef { lane in
                let depth = lane.load.depth.add(1, ordering: .sequentiallyConsistent).newValue
                lane.queue.enqueue(job, keeping: self)
                if local != nil {
                    // A second job waiting on a busy lane: a loop blocked in the kernel could take one.
                    if depth >= Self.stealThreshold { wakeBlockedLane(sparing: lane) }
                } else if depth == 1 && !lane.load.spinning.load(ordering: .relaxed)
                    && !lane.load.blocked.load(ordering: .relaxed)
                {
                    // From outside, to a lane that runs a job: that job may be a long one.
                    directory.watchForOutsideJob(on: lane)
                }
            }
            if let returning { returning.jobs.sleeperArrived(returning.keepAlive) }
        }

        /// Wakes one loop of the group that is blocked in the kernel, other than `busy`'s, so that
        /// it takes some of the jobs waiting there (its spinner steals them).
        private func wakeBlockedLane(sparing busy: Lane) {
            for ref in laneRefs {
                // A lane per job: no retain (see `laneRefs`).
                let woke = ref._withUnsafeGuaranteedRef { lane in
                    lane !== busy && wake(lane)
                }
                if woke { return }
            }
        }

        /// Wakes `lane`'s loop if it is blocked in the kernel; true if it was.
        @inline(__always)
        private func wake(_ lane: Lane) -> Bool {
            // A plain load first: this runs for nearly every job a busy lane queues for itself,
            // and a compare-exchange would take the flag's cache line from every reader.
            // One wake-up per blocked loop: whoever clears the flag sends it.
            guard lane.load.blocked.load(ordering: .sequentiallyConsistent),
                lane.load.blocked.compareExchange(expected: true, desired: false, ordering: .sequentiallyConsistent)
                    .exchanged
            else { return false }
            lane.loop.wakeUp()
            return true
        }

        /// The lanes, for a test that checks they go with the executor.
        package var lanesForTesting: [AnyObject] { lanes }

        /// Each loop's state, one line each, for a check that fails: blocked in the kernel, jobs
        /// counted and queued, jobs started, the watch's date and the delayed jobs (loop time).
        ///
        /// - Important: Safe from any thread; a snapshot that may be torn.
        package var laneReport: String {
            let now = ContinuousClock.now.loopNanoseconds
            return lanes.indices.map { index in
                let lane = lanes[index]
                let watch = lane.watchAt.withLock { $0 }
                return "lane \(index): blocked \(lane.load.blocked.load(ordering: .relaxed)), depth "
                    + "\(lane.load.depth.load(ordering: .relaxed)), queued \(lane.queue.count), ran "
                    + "\(lane.load.ran.load(ordering: .relaxed)), watch "
                    + (watch == .max ? "away" : "in \((watch - now) / 1_000) µs")
                    + ", delayed \(lane.delayedJobs.count)"
            }.joined(separator: "\n")
        }

        /// This executor as an unowned task executor.
        public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
            UnownedTaskExecutor(ordinary: self)
        }

        @inline(__always)
        fileprivate func nextLane() -> Lane {
            let index = cursor.wrappingAdd(1, ordering: .relaxed).oldValue
            return lanes[Int(UInt(bitPattern: index) % UInt(lanes.count))]
        }

        /// Where a delayed job waits: the calling thread's lane if it is one of the group's (a
        /// sleeper wakes where it slept), else the next; and the calling thread's lane, if any.
        fileprivate func schedulingLane() -> (Lane, current: Lane?) {
            let current = currentLane()
            return (current ?? nextLane(), current)
        }

        /// A delayed job went to the table of the calling thread's lane `current`: it makes sure
        /// another loop would take the job if a long job held this one at its time.
        fileprivate func scheduled(on current: Lane?) {
            if let current { directory.appointDeputy(for: current, now: ContinuousClock.now.loopNanoseconds) }
        }

        /// The lane of the calling thread, if it is one of the group's.
        @inline(__always)
        private func currentLane() -> Lane? {
            let token = Loop.currentThreadToken
            for lane in lanes where lane.threadToken == token { return lane }
            return nil
        }

        /// Where a job from a thread outside the group goes: the next loop that is not blocked in
        /// the kernel and has fewer than `localQueueLimit` jobs (a running or spinning loop takes
        /// the job without a wake-up); else the next loop. (A job from one of the group's threads
        /// stays on its loop: no wake-up of another thread, warm caches, and the jobs of a burst —
        /// a task group's children — in one queue in the order they came, from which idle loops
        /// take the oldest.)
        @inline(__always)
        private func laneFromOutside() -> Unmanaged<Lane> {
            let start = cursor.wrappingAdd(1, ordering: .relaxed).oldValue
            let count = UInt(laneRefs.count)
            for offset in 0..<laneRefs.count {
                let ref = laneRefs[Int(UInt(bitPattern: start &+ offset) % count)]
                let free = ref._withUnsafeGuaranteedRef { lane in
                    !lane.load.blocked.load(ordering: .relaxed)
                        && lane.load.depth.load(ordering: .relaxed) < Self.localQueueLimit
                }
                if free { return ref }
            }
            return laneRefs[Int(UInt(bitPattern: start) % count)]
        }

        /// The executor `LoopExecutorFactory` installs as the default executor: a group of one loop
        /// thread per processor this process may use (`LoopThreadGroup.availableProcessorCount`:
        /// the affinity mask and the cgroup CPU quota count), or `LOOP_DEFAULT_EXECUTOR_THREADS` of
        /// them, named
        /// `default-executor-<n>` (cut before the index in the kernel's 15 bytes), made when the
        /// runtime first asks for it and never shut down.
        ///
        /// - Important: Safe from any thread.
        public static let standard: LoopGroupExecutor = {
            var count = LoopThreadGroup.availableProcessorCount
            if let text = getenv("LOOP_DEFAULT_EXECUTOR_THREADS"), let wanted = Int(String(cString: text)) {
                precondition(
                    wanted >= 1,
                    "LOOP_DEFAULT_EXECUTOR_THREADS must be a number of threads of at least 1, got \(wanted).")
                count = wanted
            }
            do {
                return LoopGroupExecutor(group: try LoopThreadGroup(count: count, name: "default-executor"))
            } catch {
                fatalError(
                    "LoopExecutorFactory: the default executor's \(count) loop threads could not be started: \(error)")
            }
        }()
    }

    /// The runtime's generic serial executor — "no isolation" — as an `UnownedSerialExecutor`.
    ///
    /// A default executor must run its jobs on it, as the stock global executor does
    /// (`swift_job_run` with the generic executor): only then does the runtime let a task switch
    /// into an idle default actor, and back, inline on the same thread, and take the task's own
    /// executor preference (none, for most) as the current task executor. Run as a task executor
    /// instead (`runSynchronously(on: UnownedTaskExecutor)`), a job is a context in which the
    /// runtime never switches inline, so every call into a default actor would be a job of its
    /// own on the loop (BENCHMARKS.md, "Why the code is as it is").
    ///
    /// The standard library has no public spelling of it. `UnownedSerialExecutor` is `@frozen`: its
    /// one stored property is the runtime's two-word executor reference, and the generic executor
    /// is the reference with a null identity and no witness table (`SerialExecutorRef::generic()`,
    /// ABI). The layout is checked where this is made.
    private let genericSerialExecutor: UnownedSerialExecutor = {
        precondition(
            MemoryLayout<UnownedSerialExecutor>.size == 2 * MemoryLayout<UInt>.size,
            "LoopGroupExecutor: this toolchain's UnownedSerialExecutor is not the two-word executor reference it expects."
        )
        return unsafeBitCast((UInt(0), UInt(0)), to: UnownedSerialExecutor.self)
    }()

    // The SPI conformance: the runtime finds it by a dynamic cast; users never name it.
    @_spi(ExperimentalExecutorHooks)
    extension LoopGroupExecutor: SchedulingExecutor {
        /// Runs `job` at `instant` of `clock` in a timer of one of the group's loops.
        ///
        /// - Important: Safe from any thread.
        public func enqueue<C: Clock>(
            _ job: consuming ExecutorJob, at instant: C.Instant, tolerance: C.Duration?, clock: C
        ) {
            let (lane, current) = schedulingLane()
            lane.delayedJobs.schedule(job, at: instant, tolerance: tolerance, clock: clock, for: self)
            scheduled(on: current)
        }

        /// Runs `job` `delay` from now on `clock` in a timer of one of the group's loops.
        ///
        /// - Important: Safe from any thread.
        public func enqueue<C: Clock>(
            _ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C
        ) {
            let (lane, current) = schedulingLane()
            lane.delayedJobs.schedule(job, after: delay, tolerance: tolerance, clock: clock, for: self)
            scheduled(on: current)
        }
    }
#endif
