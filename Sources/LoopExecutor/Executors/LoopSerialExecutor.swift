import LoopRuntime

// Two doors into one loop executor.
//
// A job reaches an executor through one of two doors, and what the runtime does next depends on
// which one the job is run as. `SerialExecutor` is the door of actor isolation: a job run *as the
// serial executor* lets an actor → actor call between two actors pinned to the same loop switch
// inline (~20 ns). `TaskExecutor` is the door of a task's executor preference: `swift_task_switch`
// lets a task that prefers a task executor pass between its nonisolated frames inline only while it
// runs *as that task executor, on the generic serial executor* (the runtime's `mustSwitchToRun`
// compares both). Run as the serial executor instead, every nonisolated frame of such a task
// would be a new loop job (BENCHMARKS.md, "Why the code is as it is").
//
// Both doors are one `enqueue(_:)` method, so one object cannot tell them apart: each door is an
// object. The task door must be the `LoopExecutor` itself — `Task(executorPreference:)` retains the
// executor it is given and the runtime releases the identity of `asUnownedTaskExecutor()` when the
// task ends, so the two must be one object. The serial door is this companion: `LoopExecutor`'s
// `asUnownedSerialExecutor()` names it, so actors pinned to a `LoopExecutor` enqueue here. Each door
// has its own job queue on the same loop and modes (the task door's is made at its first job).

/// The serial side of a ``LoopExecutor``: the executor of the actors pinned to it (see "Two doors
/// into one loop executor").
final class LoopSerialExecutor: SerialExecutor, @unchecked Sendable {
    // Thread-safety: every stored property is immutable once the owning executor's init returns
    // (`delayedJobs` is written there, before the executor is shared); the queue and the delayed
    // jobs synchronize themselves.

    /// The loop whose thread runs the jobs.
    let loop: Loop
    private var queue: LoopJobQueue!
    /// Keeps the loop's `LoopThread` (if a `LoopThread` owns the loop) running while this executor
    /// lives, and so while its `LoopExecutor` lives.
    private let lifetimeHold: AnyObject?
    /// The modes of the blocks that wake the tasks parked for this executor's actors (see
    /// `ParkingSpot`), labelled for traces and stall reports; prepared once.
    let wakeUpBlocks: PreparedBlockModes
    /// This executor as an unowned serial executor, made once.
    private(set) var unownedSerial = MainActor.sharedUnownedExecutor
    #if ExperimentalExecutorHooks && compiler(>=6.3)
        /// The owning executor's delayed jobs: an enqueue here notes a returning sleeper too.
        var delayedJobs: DelayedJobs?
    #endif

    init(loop: Loop, modes: [Loop.Mode], label: StaticString?) {
        self.loop = loop
        lifetimeHold = loop.lifetimeHold()
        wakeUpBlocks = PreparedBlockModes(modes, label: "wake-up of a waiting task")
        // Unowned: the queue keeps this executor alive while it has jobs (`enqueue` hands it over),
        // so a job never finds its executor gone, and an idle executor is free to go.
        queue = LoopJobQueue(loop: loop, modes: modes, label: label) { [unowned(unsafe) self] job in
            // As the serial executor only: naming a task executor too would make every actor-to-
            // actor call on this loop look like a change of task executor to the runtime (the
            // tasks prefer none), which then enqueues instead of switching inline.
            job.runSynchronously(on: self.unownedSerial)
        }
        unownedSerial = UnownedSerialExecutor(ordinary: self)
    }

    deinit {
        queue.retire()
    }

    var modes: [Loop.Mode] { queue.modes }
    var label: StaticString? { queue.label }
    var pendingJobCount: Int { queue.count }

    /// Queues a job of an actor pinned to the executor (SPEC N1).
    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        #if ExperimentalExecutorHooks && compiler(>=6.3)
            if let delayedJobs {
                let returningSleeper = delayedJobs.noteEnqueue(job)
                queue.enqueue(job, keeping: self)
                if let returningSleeper { delayedJobs.sleeperArrived(returningSleeper) }
                return
            }
        #endif
        queue.enqueue(job, keeping: self)
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        unownedSerial
    }

    func checkIsolated() {
        precondition(
            loop.isCurrentThread,
            "LoopExecutor: expected to be on the thread of the \(loop), but this is another thread. Code isolated to an actor pinned to this loop must run on the loop's thread (in a job, or in a callout of the loop)."
        )
    }

    func isIsolatingCurrentContext() -> Bool? {
        loop.isCurrentThread
    }
}
