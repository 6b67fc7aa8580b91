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
            // "--all": the checks; stderr is kept for the failure message.
            let (status, errors) = try MainLoopTests.runChecks("--all", executable: "ExecutorHookChecks")
            let exitedNormally = (status & 0x7f) == 0
            let exitCode = (status >> 8) & 0xff
            #expect(
                exitedNormally && exitCode == 0,
                "ExecutorHookChecks failed (status \(status)); run `swift run --traits ExperimentalExecutorHooks ExecutorHookChecks` to see which check. \(errors)"
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
