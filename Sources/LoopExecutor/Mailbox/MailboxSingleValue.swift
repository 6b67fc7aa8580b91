import LoopRuntime

/// One value: a sleep's wake-up, a mode switch's outcome.
struct SingleValue<Element: Sendable>: MailboxBuffer {
    private var value: Element?

    init() {}

    mutating func append(_ element: Element) { value = element }
    mutating func removeFirst() -> Element? { value.take() }
    mutating func removeAll() { value = nil }
}

/// The executor of `isolation` if it is a ``LoopExecutor``: a task waiting in that isolation is
/// parked, and woken on that executor's loop (see "How a waiter pinned to a loop gets back onto
/// it").
func hopTarget(of isolation: (any Actor)?) -> LoopSerialExecutor? {
    guard let isolation else { return nil }
    return isolation.unownedExecutor.asSerialExecutor() as? LoopSerialExecutor
}

/// Where a task isolated to an actor pinned to a loop waits for a mailbox: an actor that is its own
/// executor and keeps the job it is handed — the waiting task, which hopped onto it to park —
/// until the mailbox wakes it. Waking runs that job in a block on the loop of the task's executor;
/// the job's next step is the hop back onto its actor, an enqueue on that same loop (see "How a
/// waiter pinned to a loop gets back onto it").
final actor ParkingSpot<Element: Sendable>: SerialExecutor {
    // Thread-safety: `executor` and `lock` are immutable; `slot` is guarded by `lock`, the lock of
    // the mailbox the spot belongs to (which the mailbox holds when it wakes the spot). `parks` is
    // isolated to the actor, which only its own (parked) jobs run on.

    private struct Slot {
        /// The parked task's job, once it has arrived.
        var job: UnownedJob?
        var isWoken = false
        var value: Element?
    }

    /// The executor of the parked task's actor, whose loop runs it again.
    nonisolated let executor: LoopSerialExecutor
    /// The lock of the spot's mailbox: one the thread sanitizer sees (`Synchronization.Mutex`'s
    /// contended path it does not, and it then reported the hand-off of `slot` between the loop's
    /// thread and a waker as a race), and no allocation of its own.
    private nonisolated let lock: ExecutorLock
    /// Touched only with `lock` held.
    private nonisolated(unsafe) var slot = Slot()
    /// Counts the parks: `park()` touches it so that the hop onto this actor does something on
    /// it, which the optimizer must keep (a hop into an empty function is removed as dead).
    private var parks = 0

    init(_ executor: LoopSerialExecutor, lock: ExecutorLock) {
        self.executor = executor
        self.lock = lock
    }

    nonisolated var unownedExecutor: UnownedSerialExecutor { asUnownedSerialExecutor() }

    /// Awaited from the task's actor: the hop here parks the task (`enqueue` keeps its job), and
    /// it returns once woken and back on the task's actor.
    func park() {
        parks &+= 1
    }

    /// The parked task's job: kept until `wake`, or run at once if the wake-up came first.
    nonisolated func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let wokenAlready = lock.withLock {
            if slot.isWoken { return true }
            slot.job = job
            return false
        }
        // Woken between registering with the mailbox and arriving here: the job is the task
        // that is handing itself over right now, so it must not run inside this call.
        if wokenAlready { runOnLoop(job) }
    }

    /// Hands `value` to the parked task and runs it again on its loop (or as soon as it has
    /// parked). The caller holds `lock` (the mailbox wakes its waiter inside its locked step).
    nonisolated func wakeHoldingLock(with value: Element?) {
        slot.isWoken = true
        slot.value = value
        if let job = slot.job.take() { runOnLoop(job) }
    }

    /// The value the task was woken with, leaving the spot ready for the next wait.
    nonisolated func takeValue() -> Element? {
        lock.withLock {
            defer { slot = Slot() }
            return slot.value
        }
    }

    /// Runs the parked job as this executor, in a block on the loop, in the modes of the task's
    /// executor. On a loop that has ended (the task's actor is pinned to it: its hop back would
    /// trap) it runs here and now, so that the trap names that loop.
    private nonisolated func runOnLoop(_ job: UnownedJob) {
        let spot = asUnownedSerialExecutor()
        let queued = executor.loop.perform(executor.wakeUpBlocks) { job.runSynchronously(on: spot) }
        if !queued { job.runSynchronously(on: spot) }
    }
}

/// A seal hold on the loop a waiter is woken on, across the wake-up call, when that call is made on
/// another thread than the loop's (on the loop's own thread, no drain can run meanwhile). `nil` if
/// no hold is needed — or none can be had: the loop has ended, and the waiter's way back traps
/// with the message of an enqueue on an ended executor, the one remaining programmer error.
struct ResumeHold {
    let loop: Loop
    let holder: StaticString

    init?<Continuation>(for waiter: MailboxState<some MailboxBuffer, Continuation>.Waiter, holder: StaticString) {
        guard let loop = waiter.hopTarget?.loop, !loop.isCurrentThread, loop.holdSeal(for: holder) else {
            return nil
        }
        self.loop = loop
        self.holder = holder
    }

    func release() {
        loop.releaseSealHold(for: holder)
    }
}
