// Task.sleep on loop executors (SchedulingExecutor): built and run only with the
// ExperimentalExecutorHooks trait (`swift test --traits ExperimentalExecutorHooks`).
#if ExperimentalExecutorHooks && compiler(>=6.3)
    import LoopExecutor
    import Synchronization
    import Testing

    @testable import LoopRuntime

    @Suite("Task.sleep on loop timers (SchedulingExecutor on LoopExecutor)", .timeLimit(.minutes(3)))
    struct TaskSleepOnLoopTests {
        // The checks while a sleep waits run in loop callouts (probe timers on the same loop): the
        // loop thread runs them on time even when other tests keep the cooperative pool busy.

        @Test(
            "SchedulingExecutor: Task.sleep in a task that prefers a loop executor is a timer of that loop, and wakes on its thread"
        )
        func sleepIsALoopTimer() async throws {
            let thread = try LoopThread(name: "task-sleep")
            defer { thread.shutdown() }
            let executor = thread.executor
            let sleeper = Task(executorPreference: executor) { () -> Bool in
                try await Task.sleep(for: .seconds(1))
                return thread.loop.isCurrentThread
            }
            let seen = Locked<(jobs: Int, timers: Int)?>(nil)
            let probe = LoopTimer(after: .milliseconds(500)) { _ in
                seen.withLock { $0 = (executor.delayedJobCount, thread.loop.timerCount(forMode: .common)) }
            }
            thread.loop.add(probe, forMode: .default)  // not a common timer: it does not count itself
            #expect(try await sleeper.value, "the task resumed off the loop's thread")
            let whileSleeping = seen.withLock { $0 }
            #expect(whileSleeping?.jobs == 1, "the sleep was not a delayed job of the executor")
            #expect(whileSleeping?.timers == 1, "the sleep was not a timer of the loop")
            #expect(executor.delayedJobCount == 0)
            #expect(await eventually { thread.loop.timerCount(forMode: .common) == 0 })
        }

        @Test(
            "SchedulingExecutor: Task.sleep(until:clock:) on ContinuousClock and SuspendingClock both become loop timers"
        )
        func clocks() async throws {
            let thread = try LoopThread(name: "task-sleep-clocks")
            defer { thread.shutdown() }
            let executor = thread.executor
            let start = ContinuousClock.now
            let continuous = Task(executorPreference: executor) { () -> Bool in
                try await Task.sleep(until: .now + .seconds(1), clock: .continuous)
                return thread.loop.isCurrentThread && ContinuousClock.now - start >= .seconds(1)
            }
            let suspending = Task(executorPreference: executor) { () -> Bool in
                try await Task.sleep(until: .now + .seconds(1), clock: .suspending)
                return thread.loop.isCurrentThread && ContinuousClock.now - start >= .seconds(1)
            }
            let seen = Locked<Int?>(nil)
            let probe = LoopTimer(after: .milliseconds(500)) { _ in seen.withLock { $0 = executor.delayedJobCount } }
            thread.loop.add(probe, forMode: .default)
            #expect(try await continuous.value, "the ContinuousClock sleep woke early or off the loop's thread")
            #expect(try await suspending.value, "the SuspendingClock sleep woke early or off the loop's thread")
            let waiting = seen.withLock { $0 }
            #expect(waiting == 2, "both sleeps should have waited in the loop's timers")
        }

        @Test("SchedulingExecutor: a sleep pauses while the loop runs a mode outside the executor's modes (SPEC R34)")
        func sleepPausesInAnotherMode() async throws {
            let thread = try LoopThread(name: "task-sleep-modes")
            defer { thread.shutdown() }
            let loop = thread.loop
            let executor = loop.executor(inModes: [.default])
            let driver = try #require(loop.driver)
            let woke = Atomic<Bool>(false)
            let sleeper = Task(executorPreference: executor) {
                try await Task.sleep(for: .seconds(1))
                woke.store(true, ordering: .releasing)
            }
            // At 300 ms the loop leaves for "tracking"; at 1.5 s (past the sleep's deadline) a
            // tracking-mode probe looks and brings the loop back.
            let before = Locked<Int?>(nil)
            let inTracking = Locked<(woke: Bool, jobs: Int, timers: Int)?>(nil)
            loop.add(
                LoopTimer(after: .milliseconds(300)) { _ in
                    before.withLock { $0 = executor.delayedJobCount }
                    driver.switchMode(to: "tracking")
                }, forMode: .default)
            loop.add(
                LoopTimer(after: .milliseconds(1500)) { _ in
                    inTracking.withLock {
                        $0 = (
                            woke.load(ordering: .acquiring), executor.delayedJobCount,
                            loop.timerCount(forMode: .default)
                        )
                    }
                    driver.switchMode(to: .default)
                }, forMode: "tracking")
            try await sleeper.value
            let waitingBefore = before.withLock { $0 }
            let paused = inTracking.withLock { $0 }
            #expect(waitingBefore == 1, "the sleep was not waiting in the loop's timers")
            #expect(paused?.woke == false, "the sleep ended while the loop ran a mode it is not in")
            #expect(paused?.jobs == 1)
            #expect(paused?.timers == 1, "the default-mode timer of the sleep should still be there")
            let wokeAfter = woke.load(ordering: .acquiring)
            #expect(wokeAfter)
        }

        @Test(
            "SchedulingExecutor: cancelling a sleeping task removes its loop timer at once and throws CancellationError"
        )
        func cancellationRemovesTheTimer() async throws {
            let thread = try LoopThread(name: "task-sleep-cancel")
            defer { thread.shutdown() }
            let executor = thread.executor
            for _ in 0..<50 {
                let sleeper = Task(executorPreference: executor) { () -> Bool in
                    do {
                        try await Task.sleep(for: .seconds(600))
                        return false
                    } catch is CancellationError {
                        return true
                    }
                }
                #expect(await eventually { executor.delayedJobCount == 1 })
                // The sleep's job is in the table before its task has suspended: a cancellation in
                // between lets the task go on inline, never to come back here (a limit the
                // executor's docs state). One block through the loop runs after the task's job has
                // returned, so the task is suspended in its sleep when it is cancelled.
                try await thread.loop.submit {}
                let start = ContinuousClock.now
                sleeper.cancel()
                #expect(try await sleeper.value, "the sleep did not throw CancellationError")
                #expect(ContinuousClock.now - start < .seconds(10))
                // The cancelled task came back to the executor: its timer went before it ran.
                #expect(executor.delayedJobCount == 0)
                #expect(await eventually { thread.loop.timerCount(forMode: .common) == 0 })
            }
        }

        @Test("SchedulingExecutor: a task cancelled before it sleeps throws at once and leaves no timer")
        func cancelledBeforeSleeping() async throws {
            let thread = try LoopThread(name: "task-sleep-precancelled")
            defer { thread.shutdown() }
            let executor = thread.executor
            let sleeper = Task(executorPreference: executor) { () -> Bool in
                withUnsafeCurrentTask { $0?.cancel() }
                do {
                    try await Task.sleep(for: .seconds(600))
                    return false
                } catch {
                    return error is CancellationError
                }
            }
            #expect(await sleeper.value)
            #expect(executor.delayedJobCount == 0)
            #expect(thread.loop.timerCount(forMode: .common) == 0)
        }

        @Test(
            "SchedulingExecutor: shutting the loop thread down ends pending sleeps early without cancelling their tasks; a sleep begun then is refused"
        )
        func shutdownEndsSleeps() async throws {
            // Issue #31, case 9: the shutdown used to cancel the sleeping tasks themselves, so every
            // later `checkCancellation()` of theirs failed.
            for _ in 0..<20 {
                let thread = try LoopThread(name: "task-sleep-shutdown")
                let executor = thread.executor
                let sleepers = (0..<4).map { _ in
                    Task(executorPreference: executor) { () -> String in
                        do {
                            try await Task.sleep(for: .seconds(600))
                        } catch {
                            return "threw \(error)"
                        }
                        guard !Task.isCancelled else { return "cancelled" }
                        // The loop no longer accepts items: a new sleep is refused.
                        do {
                            try await Task.sleep(for: .seconds(600))
                            return "slept again"
                        } catch {
                            return error is CancellationError ? "ended early, then refused" : "threw \(error)"
                        }
                    }
                }
                #expect(await eventually { executor.delayedJobCount == 4 })
                let started = ContinuousClock.now
                await thread.shutdown()
                for sleeper in sleepers { #expect(await sleeper.value == "ended early, then refused") }
                #expect(ContinuousClock.now - started < .seconds(60))
                #expect(executor.delayedJobCount == 0)
            }
        }

        @Test("SchedulingExecutor: tolerance lets a sleep wake with a later timer (SPEC R43), never early")
        func tolerance() async throws {
            let thread = try LoopThread(name: "task-sleep-tolerance")
            defer { thread.shutdown() }
            let executor = thread.executor
            let wakes = Trace()
            let observer = LoopObserver(activities: .afterWaiting) { _, _ in wakes.append("woke") }
            thread.loop.add(observer, forMode: .common)
            defer { observer.invalidate() }
            // A at 100 ms with 400 ms of tolerance, B at 250 ms: one wake-up, at B's time.
            let start = ContinuousClock.now
            let a = Task(executorPreference: executor) { () -> Duration in
                try await Task.sleep(
                    until: start + .milliseconds(100), tolerance: .milliseconds(400), clock: .continuous)
                return ContinuousClock.now - start
            }
            let b = Task(executorPreference: executor) { () -> Duration in
                try await Task.sleep(until: start + .milliseconds(250), clock: .continuous)
                return ContinuousClock.now - start
            }
            let (woke, other) = (try await a.value, try await b.value)
            #expect(woke >= .milliseconds(100), "a sleep woke early")
            #expect(other >= .milliseconds(250))
            // A waited for B's wake-up (inside its window) instead of waking the loop at 100 ms.
            #expect(woke >= .milliseconds(240), "A woke at \(woke), not with B")
        }
    }

#endif
