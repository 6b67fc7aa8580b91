// The main executor over `Loop.main` (ExperimentalExecutorHooks trait): with
// `LoopExecutorFactory` installed, `@MainActor` jobs are jobs of the main loop.
#if ExperimentalExecutorHooks && compiler(>=6.3)
    @_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
    import LoopRuntime

    /// The main actor's executor as a job queue of the main loop: `@MainActor` jobs run in the main
    /// loop's common modes, in its passes, in order with its timers, sources, blocks and observers.
    ///
    /// Install it as the process's main executor with ``LoopExecutorFactory`` (the one-line way
    /// is ``LoopExecutorFactory/runMain(_:)``). Then:
    ///
    /// - every `@MainActor` job — a `Task { @MainActor in … }`, a hop to the main actor, a
    ///   `MainActor.run` — is a job of the main loop, run in step 4 of a pass whose mode is common
    ///   (SPEC N1, N2). While the main loop runs a mode outside the common set (a tracking mode, a
    ///   modal run), main-actor work waits, like every other `.common` item, and resumes when the
    ///   loop is back;
    /// - the jobs are seen by the main loop's observers, metrics and traces (label `main actor`);
    /// - `Task.sleep` on the main actor's executor (delayed main-actor jobs) are main-loop timers in
    ///   the common modes;
    /// - ``run()`` drives the main loop on the main thread (with a `LoopDriver`, so
    ///   `Loop.main.switchMode(to:)` works) until ``stop()``.
    ///
    /// Part of Swift's experimental executor SPI (ExperimentalExecutorHooks trait), which may change
    /// in any toolchain.
    ///
    /// - Important: Safe from any thread, except ``run()`` and ``runUntil(_:)``, which must be
    ///   called on the main thread. Jobs run on the main thread.
    public final class MainLoopExecutor: SerialExecutor, @unchecked Sendable {
        // Thread-safety: every stored property is written once in `init`, before the executor is
        // shared; the queue, the delayed jobs and the driver synchronize themselves.

        /// The one main executor: the main loop's.
        ///
        /// - Important: Safe from any thread.
        public static let shared = MainLoopExecutor()

        /// The loop whose passes run the jobs: `Loop.main`.
        public let loop: Loop
        /// Runs the main loop for ``run()``; `Loop.main.driver` while it runs.
        public let driver: LoopDriver
        private var queue: LoopJobQueue!
        private var delayedJobs: DelayedJobs!
        private var unownedSerial = MainActor.sharedUnownedExecutor

        private init() {
            loop = Loop.main
            driver = LoopDriver(loop: loop)
            // `shared` is never released: unowned(unsafe) captures cannot dangle.
            queue = LoopJobQueue(loop: loop, modes: [.common], label: "main actor") { [unowned(unsafe) self] job in
                job.runSynchronously(on: self.unownedSerial)
            }
            delayedJobs = DelayedJobs(loop: loop, modes: [.common]) { [unowned(unsafe) self] job in
                self.queue.enqueue(job)
            }
            unownedSerial = UnownedSerialExecutor(ordinary: self)
        }

        /// The number of main-actor jobs waiting to run.
        ///
        /// - Important: Safe from any thread.
        public var pendingJobCount: Int { queue.count }

        /// The number of main-actor jobs waiting in main-loop timers for their time.
        ///
        /// - Important: Safe from any thread.
        public var delayedJobCount: Int { delayedJobs.count }

        /// Queues a main-actor job on the main loop.
        ///
        /// - Important: Safe from any thread.
        public func enqueue(_ job: consuming ExecutorJob) {
            let job = UnownedJob(job)
            let returningSleeper = delayedJobs.noteEnqueue(job)
            queue.enqueue(job)
            if let returningSleeper { delayedJobs.sleeperArrived(returningSleeper) }
        }

        /// This executor as an unowned serial executor (the main actor's).
        public func asUnownedSerialExecutor() -> UnownedSerialExecutor { unownedSerial }

        /// True: this is the main executor.
        public var isMainExecutor: Bool { true }

        /// Traps unless called on the main thread.
        ///
        /// - Important: Safe from any thread.
        public func checkIsolated() {
            precondition(
                loop.isCurrentThread,
                "MainLoopExecutor: expected to be on the main thread (the main actor runs there, in the main loop's passes), but this is another thread."
            )
        }

        /// True on the main thread: main-actor code may run there (in its jobs, and in the main
        /// loop's callouts).
        ///
        /// - Important: Safe from any thread.
        public func isIsolatingCurrentContext() -> Bool? { loop.isCurrentThread }

        /// Runs the main loop until ``stop()``, then runs the main-actor jobs queued by then (so work
        /// handed to the main actor before the stop is not lost), and returns.
        ///
        /// The loop runs in its default mode through ``driver``, which `Loop.main.switchMode(to:)`
        /// uses. A stop requested before the call makes it return after that final drain.
        ///
        /// - Precondition: called on the main thread, outside any run of the main loop's driver.
        public func run() throws {
            preconditionOnMainThread("run()")
            driver.run()
            drainQueuedJobs()
        }

        /// Runs the main loop until `condition` returns true; it is checked before each pass and
        /// before the loop waits.
        ///
        /// - Precondition: called on the main thread, outside any run of the main loop's driver.
        public func runUntil(_ condition: () -> Bool) throws {
            preconditionOnMainThread("runUntil(_:)")
            if condition() { return }
            withoutActuallyEscaping(condition) { condition in
                let check = MainThreadCondition(condition)
                let driver = self.driver
                let observer = LoopObserver(activities: [.beforeTimers, .beforeWaiting], label: "runUntil") { _, _ in
                    if check.isMet() { driver.stop() }
                }
                loop.add(observer, forMode: .common)
                driver.run()
                observer.invalidate()
                // The invalidated observer may outlive this call: it must not keep the condition.
                check.clear()
            }
        }

        /// Ends ``run()`` or ``runUntil(_:)`` after the current pass.
        ///
        /// - Important: Safe from any thread.
        public func stop() {
            driver.stop()
        }

        private func preconditionOnMainThread(_ call: String) {
            precondition(
                loop.isCurrentThread,
                "MainLoopExecutor.\(call) must be called on the main thread: it runs the main loop, which only runs there."
            )
        }

        /// Runs passes while main-actor jobs are queued (at most 1,000: a main actor that keeps
        /// queueing work is not drained for ever).
        private func drainQueuedJobs() {
            var passes = 0
            while queue.count > 0 && passes < 1_000 {
                _ = loop.run(.default, for: .zero)
                passes += 1
            }
        }
    }

    // The SPI conformances: the runtime finds them by a dynamic cast; users never name them.
    @_spi(ExperimentalExecutorHooks)
    extension MainLoopExecutor: MainExecutor, SchedulingExecutor {
        /// Runs `job` on the main loop at `instant` of `clock` (a main-loop timer in the common
        /// modes); see `LoopExecutor.enqueue(_:at:tolerance:clock:)` for clocks and cancellation.
        ///
        /// - Important: Safe from any thread.
        public func enqueue<C: Clock>(
            _ job: consuming ExecutorJob, at instant: C.Instant, tolerance: C.Duration?, clock: C
        ) {
            delayedJobs.schedule(job, at: instant, tolerance: tolerance, clock: clock, for: self)
        }

        /// Runs `job` on the main loop `delay` from now on `clock`.
        ///
        /// - Important: Safe from any thread.
        public func enqueue<C: Clock>(
            _ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C
        ) {
            delayedJobs.schedule(job, after: delay, tolerance: tolerance, clock: clock, for: self)
        }
    }

    /// `runUntil`'s condition, called only on the main thread (in the main loop's observer) while
    /// `runUntil` is on the stack, and cleared before it returns.
    private final class MainThreadCondition: @unchecked Sendable {
        // Confined to the main thread: set, called and cleared there.
        private var condition: (() -> Bool)?
        init(_ condition: @escaping () -> Bool) { self.condition = condition }
        func isMet() -> Bool { condition?() ?? true }
        func clear() { condition = nil }
    }
#endif
