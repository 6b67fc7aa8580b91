/// What only the loop's own thread touches: no lock, ever (see "State ownership" in
/// ThreadingModel.md). Other threads reach the loop through its shared state, under the lock, and
/// the one wake rule (Loop+Wait.swift).
///
/// Everything here is read and written by the pass, its wait, and the teardown (which runs on the
/// loop's thread at thread exit, or in `deinit` when no thread uses the loop any more).
final class ThreadConfinedState {
    // MARK: Buffers the pass reuses, so that a steady-state pass does not allocate

    // A nested run takes a buffer out while it works, so the outer run finds it empty and
    // allocates its own only in that case. Like every field here: the loop's thread only.
    @exclusivity(unchecked) var blocks: [QueuedBlock] = []
    /// The signalled sources a pass performs (loop thread only).
    @exclusivity(unchecked) var sources: [LoopSource] = []
    /// The due timers a pass fires (loop thread only).
    @exclusivity(unchecked) var dueTimers: [TimerHeap.Entry] = []
    /// The mode whose observers are being notified (`Loop.notification`); unretained: a loop's
    /// modes live as long as the loop.
    @exclusivity(unchecked) var notifiedMode: Unmanaged<ModeState>?
    /// The ready descriptor sources a pass performs (loop thread only).
    @exclusivity(unchecked) var descriptors: [(LoopDescriptorSource, LoopDescriptorSource.Events)] = []
    /// The executor job queue whose batch runs now, innermost first (a job may make a nested run
    /// in which another queue's batch runs); unretained: the batch holds the queue.
    @exclusivity(unchecked) var runningJobQueue: Unmanaged<LoopJobQueue>?
    /// The signalled sources that passes of outer run calls collected and are performing (a
    /// callout's nested run performs those still signalled too, as CFRunLoop does). Each is the
    /// buffer of an outer pass's batch, which that pass neither changes nor frees while it is here.
    @exclusivity(unchecked) var sourceBatches = BatchStack<UnsafeBufferPointer<LoopSource>>()
    /// The same for due timers: the entries of each outer batch still waiting their turn (their
    /// references still owned by the batch) and the mode they were popped from.
    @exclusivity(unchecked) var timerBatches =
        BatchStack<(entries: UnsafeBufferPointer<TimerHeap.Entry>, mode: Unmanaged<ModeState>)>()
    /// A run call has been made on this loop at least once.
    @exclusivity(unchecked) var hasRun = false
    /// A host runs the loop (a ``HostedLoop`` that has not ended).
    @exclusivity(unchecked) var isHosted = false
    /// A host runs the loop and control is in the host, not in ``HostedLoop/dispatch()``: a run
    /// call now would run the loop under the host's feet.
    @exclusivity(unchecked) var hostedOutsideDispatch = false
    /// The wait's result buffer; the wait is never re-entered while it is in use.
    @exclusivity(unchecked) var waitEvents = WaitEvents()
    /// Whether the next wait spins first, and for how long (SpinPolicy.swift).
    @exclusivity(unchecked) var spin = SpinPolicy()

    // MARK: The pass's clock

    /// The loop time last read. A pass reads the clock at most once when nothing runs — the first
    /// pass of a run call uses the reading taken at its entry; a wait that blocked, a callout and
    /// the end of each pass make it stale — and every step in between uses this: a value a little
    /// in the past only ever makes a timer fire later, never early (SPEC R34).
    @exclusivity(unchecked) private var lastNow: Int64 = 0
    /// A callout ran, or the loop blocked, since `lastNow` was read.
    @exclusivity(unchecked) private var clockIsStale = true

    /// The current loop time, read from `waiter` only if a callout or a wait made the last reading
    /// stale.
    @inline(__always)
    func now(_ waiter: any LoopWaiter) -> Int64 {
        if clockIsStale {
            lastNow = waiter.now()
            clockIsStale = false
        }
        return lastNow
    }

    /// The last reading, stale or not: for the instruments' end of a run call, which the run's
    /// last pass read the clock for just before.
    @inline(__always)
    var lastReading: Int64 { lastNow }

    /// Records a reading of the clock made by the caller (a run call's entry).
    @inline(__always)
    func setNow(_ now: Int64) {
        lastNow = now
        clockIsStale = false
    }

    /// A callout ran or the loop blocked: the next `now` reads the clock.
    @inline(__always)
    func timePassed() {
        clockIsStale = true
    }

    // MARK: Descriptor readiness

    /// Descriptor sources with readiness not yet performed (their `pendingEvents`, which other
    /// threads clear when they remove the source, are read under the lock).
    @exclusivity(unchecked) var readyDescriptorSources: [LoopDescriptorSource] = []

    // MARK: The executors' job queues

    /// The loop's job queues as of `jobQueuesVersion` (refreshed under the lock only when the
    /// version moved: queues are registered once per executor, and a pass must not take the lock
    /// to find them).
    @exclusivity(unchecked) var jobQueues: [LoopJobQueue] = []
    /// The version of the loop's queue table `jobQueues` was copied at (loop thread only).
    @exclusivity(unchecked) var jobQueuesVersion: UInt64 = 0
}

/// The batches of the passes under way, innermost on top. The top lives in a field of its own:
/// the usual push onto an empty stack and the pop back are two stores, where an array's append
/// and removal cost uniqueness checks (measured: ~30 ns on a pass performing one source).
struct BatchStack<Element> {
    private var top: Element?
    private var below: [Element] = []

    var isEmpty: Bool {
        if case .none = top { return true }
        return false
    }

    mutating func push(_ element: Element) {
        if let top { below.append(top) }
        top = element
    }

    /// Replaces the innermost batch (a pass moving through its batch). The stack is not empty.
    @inline(__always)
    mutating func replaceTop(_ element: Element) {
        top = element
    }

    mutating func pop() {
        top = below.isEmpty ? nil : below.removeLast()
    }

    /// Every batch, innermost first.
    func forEach(_ body: (Element) -> Void) {
        guard let top else { return }
        body(top)
        for element in below.reversed() { body(element) }
    }
}
