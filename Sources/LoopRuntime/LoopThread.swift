import Dispatch
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A thread that owns a loop and runs it until shut down: the resident thread of the run-loop
/// literature, serving work sent from other threads (SPEC K).
///
/// The thread's loop is kept alive by the thread's own port (an idle ``LoopPort`` in the common
/// modes), and its ``driver`` runs it in ``Loop/Mode/default`` — or the mode it is switched to —
/// until ``shutdown()``. Send it work with
/// ``perform(inModes:waitUntilDone:_:)`` (SPEC R76) and ``perform(after:inModes:_:)`` (SPEC R75),
/// or add timers, sources and ports to ``loop`` from any thread.
///
/// ```swift
/// let worker = try LoopThread(name: "db")
/// try worker.perform { connection.open() }                         // queued, in issue order
/// try worker.perform(waitUntilDone: true) { connection.vacuum() }  // blocks until it ran
/// worker.shutdown()                                                // runs what was accepted, joins
/// ```
///
/// **Shutdown policy.** ``shutdown()`` refuses new work (a perform after it throws
/// ``LoopThreadError/shutDown(thread:)``), stops the loop, runs every block and executor job
/// accepted before it — each in a pass of one of its modes — cancels the delayed performs that have not fired (their
/// timers become invalid, so the caller can see they never ran), and joins the thread. Releasing the
/// last reference to a running `LoopThread` shuts it down the same way.
///
/// - Important: Safe from any thread.
public final class LoopThread: @unchecked Sendable, CustomStringConvertible {
    // Thread-safety: `name`, `loop`, `core` and `thread` are immutable after init; `core`'s state
    // is guarded by its mutex.

    /// The thread's name (the kernel keeps its first 15 bytes).
    public let name: String
    /// The thread's loop. Add items to it from any thread; run it only from the thread.
    public let loop: Loop
    /// The driver that runs the loop: switch the thread's mode with it (or, with the
    /// `LoopExecutor` module, with `await loop.switchMode(to:)`).
    public let driver: LoopDriver
    private let core: Core
    private let thread: PlatformThread

    /// Shared by the `LoopThread` and its thread (which must not keep the `LoopThread` alive).
    private final class Core: Sendable {
        enum Phase { case starting, running, shuttingDown, ended }
        struct State {
            var phase = Phase.starting
            var loop: Loop?
            var driver: LoopDriver?
            var startError: LoopSystemError?
            var delayed: [ObjectIdentifier: LoopTimer] = [:]
            /// Someone has taken on joining (or detaching) the thread.
            var joinClaimed = false
        }
        let state = Locked(State())
        let started = DispatchSemaphore(value: 0)
        /// Entered before the thread starts, left when its main function returns.
        let running = DispatchGroup()

        /// True the first time only.
        func claimJoin() -> Bool {
            state.withLock { state in
                let first = !state.joinClaimed
                state.joinClaimed = true
                return first
            }
        }

        var isShuttingDown: Bool { state.withLock { $0.phase != .running && $0.phase != .starting } }
    }

    /// Starts a thread named `name` and waits until its loop is running.
    ///
    /// - Throws: ``LoopSystemError`` if the thread or its loop's descriptors cannot be created.
    public init(name: String = "LoopThread") throws(LoopSystemError) {
        let core = Core()
        self.name = name
        self.core = core
        core.running.enter()
        do {
            thread = try PlatformThread.spawn(name: name) {
                Self.main(core)
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
    }

    deinit {
        if loop.isCurrentThread {
            // The last reference went away on the thread itself: it cannot join itself.
            requestShutdown()
            if core.claimJoin() { thread.detach() }
        } else {
            shutdown()
        }
    }

    /// `LoopThread 'name'`.
    public var description: String { "LoopThread '\(name)'" }

    /// True until ``shutdown()`` is called.
    ///
    /// - Important: Safe from any thread.
    public var isRunning: Bool { !core.isShuttingDown }

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
    ///   - block: The work.
    /// - Throws: ``LoopThreadError/shutDown(thread:)`` after ``shutdown()``: the block was not
    ///   queued and will never run.
    /// - Important: Safe from any thread.
    public func perform(
        inModes modes: [Loop.Mode] = [.common],
        waitUntilDone: Bool = false,
        _ block: @escaping @Sendable () -> Void
    ) throws(LoopThreadError) {
        precondition(
            !modes.isEmpty,
            "LoopThread.perform(inModes:waitUntilDone:_:) was given an empty mode list for \(self): the block could never run (SPEC R76)."
        )
        if waitUntilDone && loop.isCurrentThread {
            guard isRunning else { throw .shutDown(thread: name) }
            block()
            return
        }
        let done = waitUntilDone ? DispatchSemaphore(value: 0) : nil
        try core.state.withLock { (state) throws(LoopThreadError) in
            guard state.phase == .running else { throw .shutDown(thread: name) }
            loop.perform(inModes: modes) {
                block()
                done?.signal()
            }
        }
        done?.wait()
    }

    /// Queues `block` on the thread's loop in the common modes, in issue order, waking it
    /// (SPEC R76): ``perform(inModes:waitUntilDone:_:)`` with its defaults, without building a mode
    /// list.
    ///
    /// - Throws: ``LoopThreadError/shutDown(thread:)`` after ``shutdown()``: the block was not
    ///   queued and will never run.
    /// - Important: Safe from any thread.
    public func perform(_ block: @escaping @Sendable () -> Void) throws(LoopThreadError) {
        try core.state.withLock { (state) throws(LoopThreadError) in
            guard state.phase == .running else { throw .shutDown(thread: name) }
            loop.perform(block)
        }
    }

    /// Runs `block` once on the thread, `delay` from now, in one of `modes` (SPEC R75).
    ///
    /// A one-shot timer on the thread's loop; a delay of zero still waits for the loop to run one
    /// of the modes. The returned timer is the handle: ``LoopTimer/invalidate()`` cancels it.
    /// ``shutdown()`` cancels delayed performs that have not run (their timers become invalid).
    ///
    /// - Parameters:
    ///   - delay: How long to wait at least.
    ///   - modes: The modes it may run in; must not be empty. Defaults to ``Loop/Mode/default``.
    ///   - block: The work.
    /// - Returns: The timer that will run the block.
    /// - Throws: ``LoopThreadError/shutDown(thread:)`` after ``shutdown()``.
    /// - Important: Safe from any thread.
    @discardableResult
    public func perform(
        after delay: Duration,
        inModes modes: [Loop.Mode] = [.default],
        _ block: @escaping @Sendable () -> Void
    ) throws(LoopThreadError) -> LoopTimer {
        let core = self.core
        return try core.state.withLock { (state) throws(LoopThreadError) -> LoopTimer in
            guard state.phase == .running else { throw .shutDown(thread: name) }
            let timerBox = TimerBox()
            let timer = loop.perform(after: delay, inModes: modes) {
                // The box is read under the same lock its writer holds, so a timer that fires at
                // once still finds itself.
                core.state.withLock { state in
                    if let timer = timerBox.timer { state.delayed.removeValue(forKey: ObjectIdentifier(timer)) }
                }
                block()
            }
            timerBox.timer = timer
            // Forget the performs that were cancelled (their timers invalidated) meanwhile.
            state.delayed = state.delayed.filter { $0.value.isValid }
            state.delayed[ObjectIdentifier(timer)] = timer
            return timer
        }
    }

    // MARK: - Shutdown

    /// Shuts the thread down: refuses new work, stops the loop, runs every block accepted before,
    /// cancels pending delayed performs, and waits for the thread to end. Idempotent.
    ///
    /// Called on the thread itself (from a callout), it requests the shutdown, which completes when
    /// the callout returns, and does not wait. Called from several threads, each returns once the
    /// thread has ended.
    ///
    /// - Important: Safe from any thread.
    public func shutdown() {
        requestShutdown()
        guard !loop.isCurrentThread else { return }
        core.running.wait()
        if core.claimJoin() { thread.join() }
    }

    /// Marks the shutdown and stops the loop; true the first time.
    @discardableResult
    private func requestShutdown() -> Bool {
        let first = core.state.withLock {
            guard $0.phase == .running else { return false }
            $0.phase = .shuttingDown
            return true
        }
        if first { driver.stop() }
        return first
    }

    // MARK: - The thread

    private static func main(_ core: Core) {
        let loop: Loop
        let keepAlive: LoopPort<Never>
        do {
            loop = try Loop.forCurrentThread()
            keepAlive = try LoopPort<Never> { _ in }
            try loop.add(keepAlive, forMode: .common)
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
            $0.phase = .running
        }
        core.started.signal()

        driver.run()

        // Orderly end: every block and executor job accepted before the shutdown runs, in a pass of
        // one of its modes. The executors' queues close in the same locked step that finds no work
        // left, so a job enqueued after that traps (the policy) instead of being dropped.
        // (A block that re-queues itself forever is cut off after 10,000 rounds; what is left then
        // is dropped with the loop at thread exit, SPEC R5.)
        var rounds = 0
        while case let modes = loop.modesWithQueuedWorkOrSeal(), !modes.isEmpty, rounds < 10_000 {
            for mode in modes { loop.run(mode, for: .zero) }
            rounds += 1
        }
        let delayed = core.state.withLock { state in
            state.phase = .ended
            let pending = Array(state.delayed.values)
            state.delayed.removeAll()
            return pending
        }
        for timer in delayed { timer.invalidate() }
        keepAlive.invalidate()
        // The thread now exits; its loop is torn down (SPEC R5).
    }
}

/// Lets a delayed perform's block find its own timer.
private final class TimerBox: @unchecked Sendable {
    // Written and read under the LoopThread's state lock. Weak: the timer's handler owns the box,
    // so a strong reference would be a cycle that keeps the timer and the user's block forever.
    weak var timer: LoopTimer?
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
