import CLoopRuntimeShims
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A run loop: the event loop of one thread, with CFRunLoop's semantics (`SPEC.md`).
///
/// A loop waits for work and services it in *modes*: timers (``LoopTimer``), signalled sources
/// (``LoopSource``), observers of its activities (``LoopObserver``) and blocks
/// (``perform(inModes:label:_:)``). Each thread has at most one loop, created the first time
/// ``current`` is asked for on that thread (SPEC R1); the process's main thread has ``main``
/// (SPEC R2).
///
/// ```swift
/// let loop = Loop.current
/// loop.add(LoopTimer(after: .milliseconds(10)) { _ in print("fired") }, forMode: .default)
/// loop.run(.default, for: .seconds(1))   // returns .finished once the timer is gone
/// ```
///
/// A loop runs only on its own thread (``run(_:until:returnAfterSourceHandled:)``, SPEC R7);
/// everything else — adding and removing items, signalling, ``perform(inModes:label:_:)``, ``stop()``,
/// ``wakeUp()`` — is safe from any thread, and work handed over from another thread wakes a
/// sleeping loop by itself (SPEC M2).
///
/// When a thread other than the main thread exits, its loop is torn down: every item is detached
/// (sources get their cancel callback once per mode), queued blocks are dropped, and the loop's
/// descriptors are closed (SPEC R5).
///
/// - Important: Safe from any thread, except where a member says "call on the loop's thread".
public final class Loop: @unchecked Sendable, CustomStringConvertible {
    // Thread-safety, by owner:
    // - immutable after init: `owner`, `waiter`, `isMain`, `lock`, `state`, `confined` (the
    //   references);
    // - guarded by `lock`: every field of `state`, of its `ModeState`s, and the loop-side
    //   bookkeeping of bound items (`LoopTimer.modes`, …); changed only through `change(_:)`
    //   (Loop+Changes.swift), which applies the one wake rule; atomic mirrors of a few of them
    //   let the pass skip the lock when there is nothing to do;
    // - atomics: `sleepState`, `blockedInWait` (the wake-up protocol in Loop+Wait.swift),
    //   `calloutItem` (the callout gate in Loop+Callouts.swift), `instrumentFlags`;
    // - `instruments`: its own rules (Instruments/LoopInstruments.swift);
    // - loop thread only, no lock: `confined` (the pass's buffers, clock, descriptor readiness
    //   and job-queue copy; ThreadConfinedState.swift).
    // See "State ownership" in ThreadingModel.md.

    /// The thread this loop belongs to.
    let owner: ThreadIdentity
    /// The wait primitive (epoll in production, a manual waiter in tests).
    let waiter: any LoopWaiter
    /// The waiter is a virtual clock's (a test loop): `hasVirtualClock`, without a cast per call.
    let waitsOnVirtualTime: Bool
    /// The loop may spin before it blocks (SpinPolicy.swift): its waiter is the real one and
    /// `LOOP_SPIN_BEFORE_WAIT=0` is not set.
    let spinsBeforeWaiting: Bool
    let isMain: Bool
    /// Guards `state`. Its place in the package's lock order, and the rule that nothing user-made
    /// is run or released under it: ThreadingModel.md, "Locks".
    let lock = LoopLock()
    let state = LoopState()
    /// `awake`, `sleeping` or `notified`: see Loop+Wait.swift.
    let sleepState = Atomic<UInt8>(Loop.awake)
    /// When a producer last woke the loop from a blocking wait (loop time), stamped just before
    /// its eventfd write by a loop that spins (SpinPolicy.swift): the spin decision measures the
    /// gap to the hand-off, not to the kernel's wake-up, which may be slower than the gap itself.
    let handedOverAt = Atomic<Int64>(0)
    let blockedInWait = Atomic<Bool>(false)
    /// The item whose handler the loop thread is calling, or 0 (the callout gate, Loop+Callouts.swift).
    let calloutItem = Atomic<UInt>(0)
    let confined = ThreadConfinedState()
    /// Tasks suspended in a sleep or tick sequence of this loop (LoopExecutor counts them): a test
    /// loop on virtual time reports a stall when the test leaves them waiting (VirtualWaiter).
    package let timerAwaiters = Atomic<Int>(0)
    /// Which instruments are on (`InstrumentFlags`): the one load each recording point costs.
    let instrumentFlags = Atomic<UInt8>(0)
    /// Metrics, the timeline and stall reports (Instruments/LoopInstruments.swift).
    let instruments = LoopInstruments()
    /// What the timers, observers and descriptor sources bound to this loop hold (LoopBinding.swift).
    let anchor = LoopAnchor()

    init(owner: ThreadIdentity, waiter: any LoopWaiter, isMain: Bool = false) {
        self.owner = owner
        self.waiter = waiter
        self.waitsOnVirtualTime = waiter is VirtualWaiter
        self.spinsBeforeWaiting = waiter is EpollWaiter && SpinPolicy.enabled
        self.isMain = isMain
        anchor.loop = self
        _ = state.modeState(.default)  // SPEC R3: a new loop has the default mode.
    }

    /// A loop for tests: bound to the calling thread, not registered as its current loop, driven
    /// by `waiter`.
    convenience init(waiter: any LoopWaiter) {
        self.init(owner: .current, waiter: waiter)
    }

    deinit {
        // A loop reaches deinit only when no thread holds it as its current loop; release the
        // descriptors and break the item ↔ mode reference cycles without calling out (there is no
        // `self` to hand to a cancel callback any more).
        var detached = lock.withLock { state.lifecycle.isTornDown ? TakenItems() : takeAllItems() }
        detached.release()
        waiter.close()
    }
    // MARK: - Getting loops

    /// The calling thread's loop, created on first use (SPEC R1); on the main thread, ``main``
    /// (SPEC R2).
    ///
    /// Creating a loop opens three descriptors (epoll, eventfd, timerfd). If the process is out of
    /// descriptors this traps with the failing call and errno; use ``forCurrentThread()`` to handle
    /// that case.
    ///
    /// - Important: Safe from any thread; each thread gets its own loop.
    public static var current: Loop {
        do {
            return try forCurrentThread()
        } catch {
            fatalError(
                "Loop.current: cannot create the loop of thread \(ThreadIdentity.currentDebugName): \(error)"
            )
        }
    }

    /// The calling thread's loop, created on first use (SPEC R1), or the error that prevented
    /// creating it.
    ///
    /// - Throws: ``LoopSystemError`` if a descriptor could not be opened (e.g. `EMFILE`).
    /// - Important: Safe from any thread.
    public static func forCurrentThread() throws(LoopSystemError) -> Loop {
        if cloop_is_main_thread() { return main }
        return try LoopRegistry.loopForCurrentThread()
    }

    /// The main thread's loop (SPEC R2). Reachable from every thread; on the main thread it is also
    /// ``current``. It is never torn down.
    ///
    /// - Important: Safe from any thread.
    public static var main: Loop { LoopRegistry.mainLoop }

    // MARK: - State

    /// The loop's clock: the instant its timers are compared with.
    ///
    /// For every loop a thread gets (``current``, ``main``, a `LoopThread`'s), this is
    /// `ContinuousClock.now`. A loop on a virtual clock (the `LoopTesting` library's `TestLoop`)
    /// reports its virtual time, which moves only when the test advances it. Code that computes
    /// timer dates from `loop.now` — or uses the relative forms, `LoopTimer(after:)`,
    /// `perform(after:)`, LoopExecutor's `sleep(for:)` and `ticks(every:)` — therefore behaves the
    /// same on both.
    ///
    /// - Important: Safe from any thread.
    public var now: ContinuousClock.Instant { LoopTime.instant(waiter.now()) }

    /// True only while the loop is blocked in its wait (SPEC R70); false during the short spin
    /// a loop may make before it blocks (see <doc:LoopIteration>).
    ///
    /// - Important: Safe from any thread.
    public var isWaiting: Bool { blockedInWait.load(ordering: .acquiring) }

    /// The mode of the innermost run call, or `nil` when the loop is not running (SPEC R71).
    ///
    /// - Important: Safe from any thread.
    public var currentMode: Mode? { lock.withLock { state.innermostMode?.mode } }

    /// True while a run call of this loop is in progress.
    ///
    /// - Important: Safe from any thread.
    public var isRunning: Bool { lock.withLock { !state.runCalls.isEmpty } }

    /// The modes in the common set (SPEC R62).
    ///
    /// - Important: Safe from any thread.
    public var commonModes: Set<Mode> { lock.withLock { state.commonModes } }

    /// Every concrete mode the loop knows (SPEC R4).
    ///
    /// - Important: Safe from any thread.
    public var allModes: Set<Mode> { lock.withLock { Set(state.modes.keys) } }

    /// True when the calling thread is this loop's thread.
    ///
    /// - Important: Safe from any thread.
    public var isCurrentThread: Bool { owner.isCurrent }

    /// The token of the loop's thread, unique for the life of the process: an executor over many
    /// loops finds the calling thread's among them with one thread-local load
    /// (``currentThreadToken``) and a comparison each.
    package var threadToken: UInt64 { owner.token }

    /// The calling thread's token; see ``threadToken``.
    package static var currentThreadToken: UInt64 { cloop_thread_token() }

    /// `main loop` or `loop of thread 'name' (tid N)`.
    public var description: String {
        isMain ? "main loop" : "loop of thread \(owner.debugName)"
    }

    // MARK: - Stop and wake-up

    /// Stops the innermost run call: it returns ``RunResult/stopped`` at the end of its current
    /// pass, or at once if the loop is waiting (SPEC R66, R67). Does nothing, and is not remembered,
    /// when the loop is not running.
    ///
    /// - Important: Safe from any thread.
    public func stop() {
        change { change in
            guard !state.runCalls.isEmpty else { return }
            state.requestStop(at: state.runCalls.count - 1)
            change.mustLookAgain()
        }
    }

    /// Ends the current or next wait of the running loop (SPEC R68).
    ///
    /// A wake-up sent while the loop is not running is discarded: it never causes an empty pass
    /// in a later run (SPEC M4). Work handed to the loop wakes it by itself (SPEC M2), so this is
    /// only needed after changing state the loop cannot see.
    ///
    /// - Important: Safe from any thread.
    public func wakeUp() {
        change { change in
            guard !state.runCalls.isEmpty else { return }
            state.wakeUpPending = true
            change.mustLookAgain()
        }
    }

    /// Stops the run call at `depth` (1 for the outermost), not necessarily the innermost one: a
    /// ``LoopDriver`` stops its own run this way, leaving nested runs alone.
    func stopRunCall(_ depth: Int) {
        change { change in
            guard depth >= 1, depth <= state.runCalls.count else { return }
            state.requestStop(at: depth - 1)
            change.mustLookAgain()
        }
    }

    // MARK: - Preconditions

    /// Traps unless called on the loop's thread (SPEC R7).
    func preconditionOnLoopThread(_ function: String) {
        precondition(
            owner.isCurrent,
            "Loop.\(function) was called on thread \(ThreadIdentity.currentDebugName), but this is the \(self). A loop runs only on its own thread (SPEC R7): hand work to it with perform(inModes:_:), or use Loop.current for this thread's loop."
        )
    }
}
