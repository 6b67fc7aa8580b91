// `SchedulingExecutor` on loop executors (ExperimentalExecutorHooks trait): `Task.sleep` in a
// task that prefers a loop executor becomes a loop timer.
#if ExperimentalExecutorHooks && compiler(>=6.3)
    @_spi(ExperimentalScheduling) import _Concurrency
    import LoopRuntime

    @_spi(ExperimentalExecutorHooks)
    extension LoopExecutor: SchedulingExecutor {
        /// Runs `job` on this executor at `instant` of `clock`, at the latest `tolerance` late: a
        /// one-shot loop timer in the executor's ``modes`` holds it until then (SPEC R34, R43).
        ///
        /// This is how `Task.sleep` reaches the executor: a sleep in a task that prefers this
        /// executor (`withTaskExecutorPreference(executor) { … }`, `Task(executorPreference:)`) is
        /// a loop timer. It fires only while the loop runs one of the executor's modes (so the sleep
        /// pauses while the loop runs another), shows in `Loop.timerCount(forMode:)` meanwhile, and a
        /// cancelled sleep removes its timer as soon as the cancelled task comes back to this
        /// executor. When the loop stops accepting items, waiting jobs run at once (a `Task.sleep`
        /// returns early, its task is not cancelled); a job scheduled after that runs at once too,
        /// and the task scheduling it — the current one — is cancelled (`Task.sleep` throws
        /// `CancellationError`), so that a task sleeping in rounds winds down.
        ///
        /// `ContinuousClock`, `SuspendingClock`, ``LoopClock`` and any clock whose durations are
        /// `Swift.Duration` map onto the loop's clock by their distance from their own `now`
        /// (`ContinuousClock` instants are taken as they are, but on a test loop's virtual clock).
        /// Other clocks wait in their own `sleep(until:tolerance:)` on a task, and the job comes
        /// here then.
        ///
        /// Isolation alone does not bring `Task.sleep` here: the standard library leaves an
        /// actor's executor before it sleeps, so code isolated to an actor pinned to this executor
        /// sleeps on the default executor unless its task prefers this one.
        ///
        /// Part of Swift's experimental executor SPI (ExperimentalExecutorHooks trait), which may
        /// change in any toolchain.
        ///
        /// - Important: Safe from any thread.
        public func enqueue<C: Clock>(
            _ job: consuming ExecutorJob, at instant: C.Instant, tolerance: C.Duration?, clock: C
        ) {
            delayedJobs.schedule(job, at: instant, tolerance: tolerance, clock: clock, for: self)
        }

        /// Runs `job` on this executor `delay` from now on `clock`; see
        /// ``enqueue(_:at:tolerance:clock:)``.
        ///
        /// - Important: Safe from any thread.
        public func enqueue<C: Clock>(
            _ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C
        ) {
            delayedJobs.schedule(job, after: delay, tolerance: tolerance, clock: clock, for: self)
        }
    }

    extension LoopExecutor {
        /// The number of jobs waiting in loop timers for their time: tasks in `Task.sleep` that
        /// prefer this executor, mostly (ExperimentalExecutorHooks trait).
        ///
        /// - Important: Safe from any thread.
        public var delayedJobCount: Int { delayedJobs.count }
    }
#endif
