// The process-wide executor hooks (ExperimentalExecutorHooks trait): the checks need a process whose
// main and default executors are the factory's, so they run in the `ExecutorHookChecks` executable.
#if ExperimentalExecutorHooks && compiler(>=6.3)
    import Testing

    @Suite(
        "Executor hooks: MainExecutor, default executor and factory (ExperimentalExecutorHooks)",
        .timeLimit(.minutes(3)))
    struct ExecutorHookTests {
        @Test(
            "MainExecutor/@MainActor on the main loop, default executor on loop threads, Task.sleep on their timers: ExecutorHookChecks passes"
        )
        func executorHookChecks() throws {
            // "--all": the checks.
            try expectChecksPass("--all")
        }

        @Test(
            "ExecutorHookChecks passes with a 300 µs pause between a group loop's decision to block and its look at the other loops (the window in which a lane queueing work could miss it)"
        )
        func executorHookChecksWithAWideBlockWindow() throws {
            // Without the flag-then-look order, the loop slept here with a task-group child stuck
            // behind its sibling's long job in 5 of 6 runs (check 5c).
            try expectChecksPass("--widen-block-window")
        }

        /// Runs ExecutorHookChecks with `argument` and expects it to exit with status 0; its
        /// stderr goes into the failure message.
        private func expectChecksPass(_ argument: String) throws {
            let (status, errors) = try MainLoopTests.runChecks(argument, executable: "ExecutorHookChecks")
            let exitedNormally = (status & 0x7f) == 0
            let exitCode = (status >> 8) & 0xff
            #expect(
                exitedNormally && exitCode == 0,
                "ExecutorHookChecks \(argument) failed (status \(status)); run `swift run --traits ExperimentalExecutorHooks ExecutorHookChecks \(argument)` to see which check. \(errors)"
            )
        }

        @Test("LoopExecutorFactory.runMain from a task traps with a message")
        func runMainFromATask() throws {
            let (status, errors) = try MainLoopTests.runChecks(
                "--run-main-from-a-task", executable: "ExecutorHookChecks")
            #expect(status & 0x7f != 0, "expected a trap, got status \(status)")
            #expect(errors.contains("was called from async code"))
        }
    }
#endif
