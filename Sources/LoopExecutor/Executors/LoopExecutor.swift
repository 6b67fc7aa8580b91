import LoopRuntime
import Synchronization

/// A loop seen as a Swift concurrency executor: pin actors to a loop's thread, run their jobs
/// inside the loop's passes and modes.
///
/// A `LoopExecutor` is a `SerialExecutor` (an actor whose `unownedExecutor` is this executor runs
/// on the loop's thread) and a `TaskExecutor` (`withTaskExecutorPreference(executor)` runs
/// nonisolated async code on the loop's thread). Its jobs run in step 4 of a pass whose mode is one
/// of the executor's ``modes`` — by default `Loop.Mode.common` — in enqueue order (SPEC N1). One
/// pass runs the jobs that were queued when the step began; jobs they enqueue run in the next pass,
/// so timers, observers and sources are never starved (N2). Running jobs counts as handling a
/// source (SPEC R15). A nested run started inside a job never runs jobs of the same executor, which
/// would break the actor's exclusivity (N3). An executor with queued jobs keeps its modes alive
/// (N4).
///
/// **Mode-aware actors.** An actor pinned with `modes: [.default]` does not run while the loop runs
/// another mode (a tracking mode, a modal run) and resumes when it returns — exactly like a
/// default-mode timer.
///
/// **Isolation checks.** ``checkIsolated()`` and ``isIsolatingCurrentContext()`` answer from thread
/// identity, so `MyActor.assumeIsolated { … }` works inside timer, source, port and observer
/// callouts of the loop.
///
/// **Shutdown policy.** An executor keeps its `LoopThread` running: a thread whose last handle was
/// released goes on serving the actors pinned to it, and ends once the last executor is released.
/// Shutting a `LoopThread` down first ends the loop's pending sleeps, ticks and activity streams
/// (so pinned actors waiting in them run on), then runs every job enqueued before the loop ended,
/// including the jobs those jobs enqueue. Enqueueing on an executor whose loop has ended is a
/// programmer error that traps with a message naming the loop and why it ended (for a
/// `LoopThread`: the thread that called `shutdown()`): the job could never run and its task would
/// stay suspended forever.
///
/// Get executors with `Loop.executor` or `Loop.executor(inModes:)`
/// (shared: actors on the same loop and modes then switch without a hop), or
/// `LoopThread.executor`.
///
/// - Important: Safe from any thread. Jobs run on the loop's thread.
public final class LoopExecutor: SerialExecutor, TaskExecutor, @unchecked Sendable, CustomStringConvertible {
    // Thread-safety: `loop`, `serial`, `unownedSerial` (and, with the trait, `delayedJobs`) are
    // immutable after init (set before the executor is shared); `taskJobs` is an atomic lazy
    // reference; the queues and the delayed jobs synchronize themselves.

    /// The loop whose thread runs the jobs.
    public let loop: Loop
    /// The executor's serial face: the executor of the actors pinned to it (see "Two doors" in
    /// `LoopSerialExecutor.swift`).
    let serial: LoopSerialExecutor
    /// The serial face as an unowned serial executor, made once: every hop between actors pinned
    /// to the loop asks for it (through `LoopActor.unownedExecutor`), and making it costs a lazy
    /// witness-table lookup. Written only in `init`, before the executor is shared.
    @usableFromInline @exclusivity(unchecked) private(set) var unownedSerial = MainActor.sharedUnownedExecutor
    /// The queue of the jobs of tasks that prefer this executor, made at the first one (an
    /// executor nobody prefers has no queue for the loop's passes to look at).
    private let taskJobs = AtomicLazyReference<LoopJobQueue>()
    #if ExperimentalExecutorHooks && compiler(>=6.3)
        /// Jobs handed over with a delay (`SchedulingExecutor`: `Task.sleep`), in loop timers.
        /// Written only in `init`.
        private(set) var delayedJobs: DelayedJobs!
    #endif

    /// Creates an executor of its own on `loop`. Prefer `Loop.executor(inModes:)`,
    /// which shares one executor per loop and mode list.
    ///
    /// The executor lives as long as something holds it (an actor pinned to it, a task that prefers
    /// it) or it has queued jobs; while it lives, it keeps the loop's `LoopThread` running.
    ///
    /// A labelled executor names its jobs in the loop's metrics, stall reports and traces — give
    /// the actors of one subsystem an executor of their own to see their share of the loop's time.
    ///
    /// - Parameters:
    ///   - loop: The loop whose thread runs the jobs.
    ///   - modes: The modes in which jobs run; must not be empty. Defaults to `Loop.Mode.common`.
    ///   - label: The name of the jobs' callouts in stall reports and traces (a static string).
    ///     Defaults to none.
    /// - Important: Safe from any thread.
    public init(loop: Loop, inModes modes: [Loop.Mode] = [.common], label: StaticString? = nil) {
        self.loop = loop
        serial = LoopSerialExecutor(loop: loop, modes: modes, label: label)
        unownedSerial = serial.unownedSerial
        #if ExperimentalExecutorHooks && compiler(>=6.3)
            delayedJobs = DelayedJobs(loop: loop, modes: modes) { [unowned(unsafe) self] job in
                // A woken sleeper of a task that prefers this executor: back through the task
                // door. The timer's entry holds the executor until then (see `schedule`).
                self.taskQueue.enqueue(job, keeping: self)
            }
            serial.delayedJobs = delayedJobs  // before the executor is shared
        #endif
    }

    deinit {
        taskJobs.load()?.retire()
    }

    /// The modes in which the jobs run.
    public var modes: [Loop.Mode] { serial.modes }

    /// The name of the jobs in the loop's metrics, stall reports and traces, if any.
    ///
    /// - Important: Safe from any thread (immutable).
    public var label: StaticString? { serial.label }

    /// The number of jobs waiting to run.
    ///
    /// - Important: Safe from any thread.
    public var pendingJobCount: Int { serial.pendingJobCount + (taskJobs.load()?.count ?? 0) }

    /// `LoopExecutor(<loop>, modes: […])`.
    public var description: String { "LoopExecutor(\(loop), modes: \(modes.map(\.rawValue)))" }

    /// Queues a job of a task that prefers this executor (`withTaskExecutorPreference(executor)`,
    /// `Task(executorPreference:)`) to run on the loop's thread, as this task executor (SPEC N1).
    /// Jobs of actors pinned to the executor reach its serial side instead
    /// (``asUnownedSerialExecutor()``).
    ///
    /// Allocation-free in the steady state; wakes the loop only if it sleeps in one of the
    /// executor's modes and the queue was empty.
    ///
    /// - Precondition: the loop has not ended (see the shutdown policy).
    /// - Important: Safe from any thread.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        #if ExperimentalExecutorHooks && compiler(>=6.3)
            let returningSleeper = delayedJobs.noteEnqueue(job)
            taskQueue.enqueue(job, keeping: self)
            if let returningSleeper { delayedJobs.sleeperArrived(returningSleeper) }
        #else
            taskQueue.enqueue(job, keeping: self)
        #endif
    }

    /// The queue of the task door, made at the first job that comes through it.
    private var taskQueue: LoopJobQueue {
        if let queue = taskJobs.load() { return queue }
        // Unowned: the queue keeps the executor alive while it has jobs (`enqueue` hands it over).
        let made = LoopJobQueue(loop: loop, modes: serial.modes, label: serial.label) { [unowned(unsafe) self] job in
            // As this task executor, on the generic serial executor: the runtime then passes
            // between the task's nonisolated frames inline (see "Two doors").
            job.runSynchronously(on: self.asUnownedTaskExecutor())
        }
        let queue = taskJobs.storeIfNil(made)
        if queue !== made { made.retire() }  // a racing first job made one first
        return queue
    }

    /// The executor of the actors pinned to this one, as an unowned serial executor: a
    /// companion object of this executor, on the same loop and modes, whose jobs run as a serial
    /// executor (see ``enqueue(_:)`` for the jobs of tasks that prefer this executor).
    @inlinable
    public func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        unownedSerial
    }

    /// This executor as an unowned task executor.
    public func asUnownedTaskExecutor() -> UnownedTaskExecutor {
        UnownedTaskExecutor(ordinary: self)
    }

    /// Traps unless called on the loop's thread.
    ///
    /// - Important: Safe from any thread.
    public func checkIsolated() {
        precondition(
            loop.isCurrentThread,
            "LoopExecutor: expected to be on the thread of the \(loop), but this is another thread. Code isolated to an actor pinned to this loop must run on the loop's thread (in a job, or in a callout of the loop)."
        )
    }

    /// True on the loop's thread: actor-isolated code of this executor may run there (in its jobs
    /// and in the loop's callouts).
    ///
    /// - Important: Safe from any thread.
    public func isIsolatingCurrentContext() -> Bool? {
        loop.isCurrentThread
    }
}

extension Loop {
    /// The loop's shared executor for the common modes.
    ///
    /// Every call returns the same executor, so actors pinned to it switch between each other
    /// without a hop.
    ///
    /// - Important: Safe from any thread.
    public var executor: LoopExecutor { executor(inModes: [.common]) }

    /// The loop's shared executor for `modes` (one per loop and mode list, while it is in use: the
    /// loop does not keep it alive).
    ///
    /// - Parameter modes: The modes in which the jobs run; must not be empty.
    /// - Important: Safe from any thread.
    public func executor(inModes modes: [Mode]) -> LoopExecutor {
        attachment(for: modes, make: { LoopExecutor(loop: self, inModes: modes) })
    }
}

extension LoopThread {
    /// The thread's loop's shared executor for the common modes: pin actors to this thread with it.
    ///
    /// While an executor is held (by a pinned actor), the thread keeps running even if this
    /// `LoopThread` is released; see the executor's shutdown policy.
    ///
    /// - Important: Safe from any thread.
    public var executor: LoopExecutor { loop.executor }
}

/// An actor pinned to a loop's thread: provide ``loopExecutor`` and its jobs run on that loop.
///
/// ```swift
/// actor Database: LoopActor {
///     nonisolated let loopExecutor: LoopExecutor
///     private var connection: OpaquePointer?   // a thread-affine C handle
///
///     init(thread: LoopThread) async {
///         loopExecutor = thread.executor
///         // Every stored property is set: from here on the init runs on the actor's executor,
///         // so the handle is opened on the loop's thread.
///         connection = open_connection()
///     }
/// }
/// ```
///
/// Open thread-affine handles in an `async` initializer like this one (or in a method): a
/// synchronous initializer runs on the caller's thread, not the loop's.
///
/// - Important: The executor must stay the same for the life of the actor.
public protocol LoopActor: Actor {
    /// The executor the actor's jobs run on.
    nonisolated var loopExecutor: LoopExecutor { get }
}

extension LoopActor {
    /// The actor's executor: ``loopExecutor``.
    ///
    /// Inlinable, and the executor stores its unowned form, so that a hop between pinned actors
    /// costs two loads here, as much as an actor that stores its `UnownedSerialExecutor` itself.
    @inlinable
    public nonisolated var unownedExecutor: UnownedSerialExecutor {
        loopExecutor.asUnownedSerialExecutor()
    }
}
