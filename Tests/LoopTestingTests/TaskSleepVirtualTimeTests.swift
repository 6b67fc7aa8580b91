// Task.sleep on a test loop's virtual time (ExperimentalExecutorHooks trait): the test loop's
// executor is a SchedulingExecutor like every loop executor.
#if ExperimentalExecutorHooks && compiler(>=6.3)
    import LoopExecutor
    import LoopRuntime
    import LoopTesting
    import Testing

    @Suite("Task.sleep on virtual time (SchedulingExecutor on a TestLoop's executor)", .timeLimit(.minutes(3)))
    struct TaskSleepVirtualTimeTests {
        @Test(
            "SchedulingExecutor: Task.sleep in a task that prefers a test loop's executor wakes when the test advances past it"
        )
        func sleepOnVirtualTime() async throws {
            let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
            let log = Log()
            let sleeper = Task(executorPreference: loop.executor) {
                try await Task.sleep(for: .seconds(60))
                log.append("woke@\(ms(loop)) on loop \(loop.loop.isCurrentThread)")
            }
            try await loop.runUntilIdle()  // the task runs up to its sleep
            #expect(loop.executor.delayedJobCount == 1)
            #expect(loop.loop.timerCount(forMode: .common) == 1)
            try await loop.advance(by: .seconds(59))
            #expect(log.all.isEmpty)
            try await loop.advance(by: .seconds(1))
            // advance returned with the loop idle: the woken task already ran, on the loop.
            #expect(log.text == "woke@60000 on loop true")
            try await sleeper.value
            #expect(loop.loop.timerCount(forMode: .common) == 0)
        }

        @Test("SchedulingExecutor: a sleep's tolerance lets it wake with a later timer on virtual time (SPEC R43)")
        func toleranceOnVirtualTime() async throws {
            let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
            let log = Log()
            let sleeper = Task(executorPreference: loop.executor) {
                try await Task.sleep(for: .milliseconds(100), tolerance: .milliseconds(50))
                log.append("sleep@\(ms(loop))")
            }
            try await loop.runUntilIdle()
            loop.loop.add(
                LoopTimer(after: .milliseconds(120)) { _ in log.append("timer@\(ms(loop))") }, forMode: .default)
            try await loop.runUntilIdle()
            let observer = LoopObserver(activities: .afterWaiting) { _, _ in log.append("woke@\(ms(loop))") }
            loop.loop.add(observer, forMode: .default)
            try await loop.advance(by: .milliseconds(200))
            // The loop wakes at 120 ms, inside both windows; never early.
            #expect(log.all.first == "woke@120")
            #expect(log.all.contains("sleep@120"))
            // No wake-up at 100 ms. (The woken task comes back through Swift's global pool, which
            // may wake the loop once more, still at 120 ms.)
            #expect(log.all.filter { $0.hasPrefix("woke@") }.allSatisfy { $0 == "woke@120" })
            try await sleeper.value
            observer.invalidate()
        }

        @Test("SchedulingExecutor: cancelling a sleep on virtual time removes its timer without advancing")
        func cancellationOnVirtualTime() async throws {
            let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
            let sleeper = Task(executorPreference: loop.executor) { () -> Bool in
                do {
                    try await Task.sleep(for: .seconds(3600))
                    return false
                } catch {
                    return error is CancellationError
                }
            }
            try await loop.runUntilIdle()
            #expect(loop.loop.timerCount(forMode: .common) == 1)
            sleeper.cancel()
            #expect(await sleeper.value)
            try await loop.runUntilIdle()
            #expect(loop.executor.delayedJobCount == 0)
            #expect(loop.loop.timerCount(forMode: .common) == 0)
            #expect(loop.elapsed == .zero)
        }

        /// Issue #31, case 10: the virtual distance of a `ContinuousClock` deadline was converted
        /// to whole milliseconds through an `Int64` that `.seconds(Int64.max)` overflows (a trap).
        @Test("SchedulingExecutor: Task.sleep(for: .seconds(Int64.max)) on virtual time waits as 'never' and cancels")
        func sleepForEver() async throws {
            let loop = try TestLoop(stallTimeout: .seconds(Int64.max))
            let sleeper = Task(executorPreference: loop.executor) {
                try await Task.sleep(for: .seconds(Int64.max))
            }
            try await loop.runUntilIdle()
            #expect(loop.executor.delayedJobCount == 1)
            try await loop.advance(by: .seconds(1_000_000_000))
            #expect(loop.executor.delayedJobCount == 1)
            sleeper.cancel()
            await #expect(throws: CancellationError.self) { try await sleeper.value }
            await loop.shutdown()
        }
    }
#endif
