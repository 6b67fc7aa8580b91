import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A thread that owns a loop and runs it until shut down: the resident thread of the run-loop
/// literature, serving work sent from other threads (SPEC K).
///
/// The thread's loop is kept alive by a source of its own that is never signalled (SPEC R10's
/// idiom, in the common modes), and its ``driver`` runs it in ``Loop/Mode/default`` — or the mode
/// it is switched to — until ``shutdown()``. Send it work with
/// ``perform(inModes:waitUntilDone:label:_:)`` (SPEC R76) and ``perform(after:inModes:label:_:)`` (SPEC R75),
/// or add timers, sources and ports to ``loop`` from any thread.
///
/// ```swift
/// let worker = try LoopThread(name: "db")
/// try worker.perform { connection.open() }                         // queued, in issue order
/// try worker.perform(waitUntilDone: true) { connection.vacuum() }  // blocks until it ran
/// worker.shutdown()                                                // runs what was accepted, joins
/// ```
///
/// **Shutdown.** ``shutdown()`` (or `shutdown(isolation:)` from async code, in the `LoopExecutor`
/// module) takes the loop from open to draining to ended, in this order:
/// 1. New work through the thread is refused (``perform(inModes:waitUntilDone:label:_:)`` throws
///    ``LoopThreadError/shutDown(thread:)``), and the loop refuses new items (a timer, observer,
///    descriptor source or port added now is invalidated). Every pending async sleep, tick
///    sequence and activity stream of the loop ends now (a sleep throws `LoopEndedError`, the
///    sequences end), *before* the executors stop, so an actor pinned to this thread that was
///    waiting in one of them runs on.
/// 2. The loop is stopped, and every block, executor job and port message accepted so far runs —
///    each in a pass of one of its modes — and so does the work that work queues, until none is
///    left; tasks resumed in step 1 that are still on their way back onto this loop are waited
///    for. Delayed performs that have not fired are cancelled (their timers become invalid).
/// 3. The loop ends: ``Loop/perform(inModes:label:_:)`` returns `false`, a port's send throws, an enqueue
///    on one of its executors traps with a message naming the loop and the thread that called
///    `shutdown()` (the one remaining programmer error: let pinned actors finish first).
/// 4. Every item is detached (SPEC R5), the descriptors are closed, the thread ends — and only then
///    does `shutdown()` return, on every thread that called it.
///
/// **Releasing the last reference** never crashes anything. If no executor of the loop is held any
/// more (no actor pinned to the thread is alive), the release shuts the thread down as above and
/// waits for it. Otherwise the thread goes on serving the pinned actors and shuts itself down the
/// same way once the last executor is released. A plain reference to ``loop`` does not keep the
/// thread: calls on the loop after it ended are answered (`false`, an error, an invalidated item).
///
/// - Important: Safe from any thread.
public final class LoopThread: @unchecked Sendable, CustomStringConvertible {
    // Thread-safety: `name`, `loop`, `driver`, `core` and `thread` are immutable after init;
    // `core`'s state is guarded by its lock; `lifetimeHold` is only touched by init and deinit.

    /// The thread's name, in full (the kernel keeps 15 bytes: a longer name is cut there, keeping
    /// a trailing `-<number>`, so `default-executor-12` shows as `default-exec-12`).
    public let name: String
    /// The thread's loop. Add items to it from any thread; run it only from the thread.
    public let loop: Loop
    /// The driver that runs the loop: switch the thread's mode with it (or, with the
    /// `LoopExecutor` module, with `await loop.switchMode(to:)`).
    public let driver: LoopDriver
    private let core: Core
    private let thread: PlatformThread
    /// Keeps the thread running; shared with the loop's executors (see ``LifetimeHold``).
    private var lifetimeHold: LifetimeHold?

    /// Shared by the `LoopThread` and its thread (which must not keep the `LoopThread` alive).
    ///
    /// Lock order: `state`'s lock is a leaf — nothing else is locked while it is held (not the
    /// loop's lock, not an item's), and nothing that can run user code or release a user's object
    /// runs under it (see `perform(after:inModes:label:_:)`). The package's whole order is in
    /// ThreadingModel.md, "Locks".
    private final class Core: Sendable {
        struct State {
            var loop: Loop?
            var driver: LoopDriver?
            var startError: LoopSystemError?
            var delayed: [ObjectIdentifier: LoopTimer] = [:]
            /// Someone has taken on joining (or detaching) the thread.
            var joinClaimed = false
        }
        let state = Locked(State())
        let started = DispatchSemaphore(value: 0)
        /// Entered before the thread starts, left when its main function returns — after the loop
        /// was drained and torn down.
        let running = DispatchGroup()

        /// True the first time only.
        func claimJoin() -> Bool {
            state.withLock { state in
                let first = !state.joinClaimed
                state.joinClaimed = true
                return first
            }
        }
    }

    /// What keeps a released `LoopThread` serving the actors pinned to it: held by the `LoopThread`
    /// and by every executor of its loop (weakly by the loop). When the last holder lets go, the
    /// thread shuts itself down and, since nobody is left to join it, detaches.
    private final class LifetimeHold: Sendable {
        let loop: Loop
        let driver: LoopDriver
        let core: Core
        let thread: PlatformThread

        init(loop: Loop, driver: LoopDriver, core: Core, thread: PlatformThread) {
            self.loop = loop
            self.driver = driver
            self.core = core
            self.thread = thread
        }

        deinit {
            if loop.beginDraining(.released) { driver.stop() }
            if core.claimJoin() { thread.detach() }
        }
    }

    /// Starts a thread named `name` and waits until its loop is running.
    ///
    /// - Throws: ``LoopSystemError`` if the thread or its loop's descriptors cannot be created.
    public convenience init(name: String = "LoopThread") throws(LoopSystemError) {
        try self.init(name: name, waiter: nil)
    }

    /// Starts the thread; its loop uses the waiter `waiter` makes on the thread (a virtual clock's,
    /// for `TestLoop`), or epoll's if `nil`.
    init(
        name: String, waiter: (@Sendable () throws(LoopSystemError) -> any LoopWaiter)?
    ) throws(LoopSystemError) {
        let core = Core()
        self.name = name
        self.core = core
        core.running.enter()
        do {
            thread = try PlatformThread.spawn(name: name) {
                Self.main(core, waiter: waiter)
                core.running.leave()
            }
        } catch {
            core.running.leave()
            throw error
        }
        core.started.wait()
        let (loop, driver, error) = core.state.withLock { ($0.loop, $0.driver, $0.startError) }
        if let error {
            _ = core.claimJoin()
            thread.join()
            throw error
        }
        self.loop = loop!
        self.driver = driver!
        let lifetimeHold = LifetimeHold(loop: loop!, driver: driver!, core: core, thread: thread)
        loop!.setLifetimeHold(lifetimeHold)
        self.lifetimeHold = lifetimeHold
    }

    deinit {
        guard isKnownUniquelyReferenced(&lifetimeHold) else {
            // An executor of the loop is still held (an actor pinned to the thread may still send
            // it work): the thread serves on, and ends when the last executor is released.
            return
        }
        // Nothing else can reach the thread: shut it down now, as `shutdown()` does.
        if core.claimJoin() {
            if loop.beginDraining(.released) { driver.stop() }
            lifetimeHold = nil
            if loop.isCurrentThread {
                thread.detach()  // the last reference went away on the thread itself
            } else {
                core.running.wait()
                thread.join()
            }
        }
    }

    /// `LoopThread 'name'`.
    public var description: String { "LoopThread '\(name)'" }

    /// True until a shutdown begins (``shutdown()``, or the release of the last reference): the
    /// thread accepts new work. (Not ``Loop/isRunning``, which says a run call is in progress.)
    ///
    /// - Important: Safe from any thread.
    public var isOpen: Bool { loop.isOpen }

    /// The former name of ``isOpen``.
    ///
    /// - Important: Safe from any thread.
    @available(
        *, deprecated, renamed: "isOpen",
        message: "It read like Loop.isRunning (a run call is in progress); it means the thread accepts work."
    )
    public var isRunning: Bool { isOpen }

    // MARK: - Cross-thread perform

    /// Queues `block` on the thread's loop in `modes`, in issue order, waking it (SPEC R76).
    ///
    /// With `waitUntilDone`, the caller blocks until the block has run; on the thread itself the
    /// block then runs immediately, inline. Without it, the block is queued even when called on
    /// the thread. Performing never removes the loop's other sources.
    ///
    /// - Parameters:
    ///   - modes: The modes the block may run in; must not be empty. Defaults to ``Loop/Mode/common``.
    ///   - waitUntilDone: Block the caller until the block has run.
    ///   - label: The name of the block's callout in stall reports and traces (see
    ///     ``Loop/perform(inModes:label:_:)``). Defaults to none.
    ///   - block: The work.
    /// - Throws: ``LoopThreadError/shutDown(thread:)`` once a shutdown has begun: the block was not
    ///   queued and will never run. (A block accepted before runs in the shutdown's drain.)
    /// - Important: Safe from any thread.
    public func perform(
        inModes modes: [Loop.Mode] = [.common],
        waitUntilDone: Bool = false,
        label: StaticString? = nil,
        _ block: @escaping @Sendable () -> Void
    ) throws(LoopThreadError) {
        preconditionSomeMode(modes, in: "LoopThread.perform(inModes:waitUntilDone:label:_:)", of: "\(self)")
        if waitUntilDone && loop.isCurrentThread {
            guard isOpen else { throw .shutDown(thread: name) }
            block()
            return
        }
        guard waitUntilDone else {
            // The block itself is queued: no wrapping closure to allocate.
            guard loop.performIfOpen(inModes: modes, label: label, block) else { throw .shutDown(thread: name) }
            return
        }
        let done = DispatchSemaphore(value: 0)
        let queued = loop.performIfOpen(inModes: modes, label: label) {
            block()
            done.signal()
        }
        guard queued else { throw .shutDown(thread: name) }
        done.wait()
    }

    /// Queues `block` on the thread's loop in the common modes, in issue order, waking it
    /// (SPEC R76): ``perform(inModes:waitUntilDone:label:_:)`` with its defaults, without building a mode
    /// list.
    ///
    /// - Throws: ``LoopThreadError/shutDown(thread:)`` once a shutdown has begun: the block was not
    ///   queued and will never run.
    /// - Important: Safe from any thread.
    public func perform(_ block: consuming @escaping @Sendable () -> Void) throws(LoopThreadError) {
        guard loop.performIfOpen(block) else { throw .shutDown(thread: name) }
    }

    /// Runs `block` once on the thread, `delay` from now, in one of `modes` (SPEC R75).
    ///
    /// A one-shot timer on the thread's loop; a delay of zero still waits for the loop to run one
    /// of the modes. The returned timer is the handle: ``LoopTimer/invalidate()`` cancels it.
    /// A shutdown cancels delayed performs that have not run (their timers become invalid).
    ///
    /// - Parameters:
    ///   - delay: How long to wait at least.
    ///   - modes: The modes it may run in; must not be empty. Defaults to ``Loop/Mode/default``.
    ///   - label: The name of the block's callout in stall reports and traces (the timer's label).
    ///     Defaults to none.
    ///   - block: The work.
    /// - Returns: The timer that will run the block (invalid already if a shutdown began meanwhile).
    /// - Throws: ``LoopThreadError/shutDown(thread:)`` once a shutdown has begun.
    /// - Important: Safe from any thread.
    @discardableResult
    public func perform(
        after delay: Duration,
        inModes modes: [Loop.Mode] = [.default],
        label: StaticString? = nil,
        _ block: @escaping @Sendable () -> Void
    ) throws(LoopThreadError) -> LoopTimer {
        guard isOpen else { throw .shutDown(thread: name) }
        preconditionSomeMode(
            modes, in: "LoopThread.perform(after:inModes:label:_:)", of: "\(self)", defaults: "[.default]")
        let core = self.core
        // The delay is resolved on the loop's clock when the timer is added (`LoopTimer(after:)`).
        let timer = LoopTimer(after: delay, label: label) { timer in
            let done = core.state.withLock { $0.delayed.removeValue(forKey: ObjectIdentifier(timer)) }
            _ = done  // released after unlocking
            block()
        }
        // Registered before it is added, so that it finds itself when it fires at once. No user
        // code runs under the core lock: the delayed performs that were cancelled meanwhile (their
        // timers invalidated) are forgotten here but let go of — with whatever their blocks
        // captured — after unlocking, and the loop is not touched under it.
        let cancelled: [LoopTimer] = core.state.withLock { state in
            let cancelled = state.delayed.values.filter { !$0.isValid }
            for timer in cancelled { state.delayed.removeValue(forKey: ObjectIdentifier(timer)) }
            state.delayed[ObjectIdentifier(timer)] = timer
            return cancelled
        }
        _ = cancelled
        for mode in modes { loop.add(timer, forMode: mode) }  // refused (invalidated) if a shutdown began
        return timer
    }

    // MARK: - Shutdown

    /// Shuts the thread down and waits until it has ended: refuses new work, ends the loop's
    /// pending sleeps, ticks and activity streams, runs every block, job and port message accepted
    /// before, cancels pending delayed performs, tears the loop down and joins the thread (see
    /// *Shutdown* above). Idempotent.
    ///
    /// Called on the thread itself (from a callout or a job), it requests the shutdown, which
    /// completes when the callout returns, and does not wait. Called from several threads, each
    /// returns once the thread has ended and its loop was torn down. From async code prefer
    /// `shutdown(isolation:)` (in the `LoopExecutor` module), which does not block a thread of the
    /// cooperative pool.
    ///
    /// - Important: Safe from any thread.
    public func shutdown() {
        requestShutdown()
        guard !loop.isCurrentThread else { return }
        core.running.wait()
        if core.claimJoin() { thread.join() }
    }

    /// Begins the shutdown like ``shutdown()`` and calls `completion` once the thread has ended
    /// (on a thread of Dispatch's global queues), without blocking the caller; returns false,
    /// calling nothing, on the thread itself (the shutdown completes when the current callout
    /// returns). Support for the `LoopExecutor` module's `shutdown(isolation:)`.
    ///
    /// - Important: Safe from any thread.
    package func shutdown(then completion: @escaping @Sendable () -> Void) -> Bool {
        requestShutdown()
        guard !loop.isCurrentThread else { return false }
        let core = self.core
        let thread = self.thread
        core.running.notify(queue: .global()) {
            if core.claimJoin() { thread.join() }
            completion()
        }
        return true
    }

    /// Begins the shutdown (shutdown step 1, Loop+Lifecycle.swift) and stops the drive.
    private func requestShutdown() {
        if loop.beginDraining(.shutDown(calledOn: ThreadIdentity.currentDebugName)) { driver.stop() }
    }

    // MARK: - The thread

    /// How long a shutdown's drain waits for seal holds (`Loop.holdSeal(for:)`) before it traps
    /// naming them, in nanoseconds: a hold lasts microseconds, so one still out after this was
    /// never released. Tests lower it (in an exit test's own process).
    static let sealHoldLimit = Atomic<Int64>(30_000_000_000)

    private static func main(_ core: Core, waiter: (@Sendable () throws(LoopSystemError) -> any LoopWaiter)?) {
        let loop: Loop
        // Keeps the common modes alive for nested runs too (the driver keeps the mode it runs
        // alive). A source, not an idle port: a port is a descriptor source, and a mode with one
        // makes every polling pass look at its descriptors (an `epoll_wait` per executor job).
        let keepAlive = LoopSource {}
        do {
            if let waiter {
                loop = LoopRegistry.loopForCurrentThread(waiter: try waiter())
            } else {
                loop = try Loop.forCurrentThread()
            }
            loop.add(keepAlive, forMode: .common, whileDraining: true)
        } catch {
            core.state.withLock { $0.startError = error }
            core.started.signal()
            return
        }
        let driver = LoopDriver(loop: loop)
        loop.registerDriver(driver)  // before `started`: `loop.driver` is set once init returns
        core.state.withLock {
            $0.loop = loop
            $0.driver = driver
        }
        core.started.signal()

        driver.run()

        // Shutdown steps 2–4 (Loop+Lifecycle.swift). The drive can also end because someone stopped
        // the driver itself: that ends the thread too, in the same order.
        loop.beginDraining(.threadExited)
        // A drain that never runs dry (a block that re-queues itself for ever) is cut off after
        // 10,000 rounds; what is left then is dropped with the loop (SPEC R5).
        var rounds = 0
        var waitingSince: ContinuousClock.Instant?
        drain: while true {
            switch loop.nextDrainStep(force: rounds == 10_000) {
            case .run(let modes):
                for mode in modes { loop.run(mode, for: .zero) }
                rounds += 1
                waitingSince = nil
            case .wait:
                // Resumptions of waiters are under way on other threads: sleep until their jobs
                // arrive (an enqueue wakes a loop asleep in its mode, the last released hold wakes
                // it too; the bound covers jobs for modes outside the common ones). A hold lasts
                // microseconds: one still out after `sealHoldLimit` was never given back.
                let since = waitingSince ?? .now
                waitingSince = since
                let limit = Duration.nanoseconds(sealHoldLimit.load(ordering: .relaxed))
                precondition(
                    ContinuousClock.now - since < limit,
                    "LoopThread: the shutdown of the \(loop) has waited \(limit) for seal holds that were never released: \(loop.sealHoldersDescription). Each hold covers the resumption of an async waiter whose task is then enqueued on this loop; one that is never released is a bug in whatever took it."
                )
                loop.run(.default, for: .milliseconds(5))
            case .sealed:
                break drain
            }
        }
        let delayed = core.state.withLock { state in
            defer { state.delayed.removeAll() }
            return Array(state.delayed.values)
        }
        for timer in delayed { timer.invalidate() }
        keepAlive.invalidate()
        loop.tearDown()
        // The thread now exits; `running` is left, and every `shutdown()` caller returns.
    }
}

/// Why a ``LoopThread`` refused work.
public enum LoopThreadError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The thread was shut down (or is shutting down): the work was not queued and will never run.
    case shutDown(thread: String)

    /// A sentence for logs.
    public var description: String {
        switch self {
        case .shutDown(let thread): "LoopThread '\(thread)' is shut down; the work was not queued"
        }
    }
}
