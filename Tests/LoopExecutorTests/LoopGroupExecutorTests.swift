// LoopGroupExecutor instances of a test's own (ExperimentalExecutorHooks trait): built and run only
// with `swift test --traits ExperimentalExecutorHooks`. The process-wide default executor is
// checked by ExecutorHookChecks.
#if ExperimentalExecutorHooks && compiler(>=6.3)
    import LoopExecutor
    import Synchronization
    import Testing

    @testable import LoopRuntime

    #if canImport(Glibc)
        import Glibc
    #endif

    @Suite("LoopGroupExecutor", .timeLimit(.minutes(2)))
    struct LoopGroupExecutorTests {
        /// Issue #31, case 2: the spinner captured its lane `unowned(unsafe)` and its invalidation
        /// did not wait for a spin under way, so a release during a spin freed the lane under it
        /// (a heap-use-after-free under AddressSanitizer).
        @Test("An executor released while its loops spin before waiting leaves no spinner behind (×200)")
        func releaseWhileSpinning() throws {
            let group = try LoopThreadGroup(count: 2, name: "spin")
            defer { group.shutdown() }
            /// The executors' spinners in each loop's default mode.
            func spinnerCounts() -> [Int] {
                group.threads.map { thread in
                    thread.loop.lock.withLock {
                        let observers = thread.loop.state.modes[.default]?.observers ?? []
                        return observers.filter { $0.label?.description == "default executor spin" }.count
                    }
                }
            }
            let spins = Atomic<Int>(0)
            // Counts the passes that reach the wait: each is where a spinner spins.
            let counters = group.threads.map { thread in
                let counter = LoopObserver(activities: .beforeWaiting, order: .max) { _, _ in
                    spins.add(1, ordering: .relaxed)
                }
                thread.loop.add(counter, forMode: .common)
                return counter
            }
            for round in 0..<200 {
                var executor: LoopGroupExecutor? = LoopGroupExecutor(group: group)
                if round == 0 { #expect(spinnerCounts() == [1, 1]) }
                // Wake both loops: each runs a pass and spins (up to 50 µs) before it waits again.
                for thread in group.threads { _ = thread.loop.perform {} }
                usleep(UInt32(round % 60))
                executor = nil
                _ = executor
            }
            // Every executor's spinner left its loop with the executor.
            for thread in group.threads {
                try thread.perform(waitUntilDone: true) {}
            }
            #expect(spins.load(ordering: .relaxed) > 0)
            #expect(spinnerCounts() == [0, 0])
            for counter in counters { counter.invalidate() }
        }

        /// A job from a thread outside the group goes to a loop that is not blocked in the kernel
        /// — which may be one held by a long job — and the other loop, blocked, was not told: the
        /// job waited for the long job to end (10 s here).
        @Test("A job from outside the group queued behind a long job is taken by the other loop (×10)")
        func outsideJobBehindALongJob() async throws {
            let group = try LoopThreadGroup(count: 2, name: "outside")
            defer { group.shutdown() }
            let executor = LoopGroupExecutor(group: group)
            final class Flags: Sendable {
                let started = Atomic<Bool>(false)
                let released = Atomic<Bool>(false)
            }
            for _ in 0..<10 {
                let flags = Flags()
                let long = Task(executorPreference: executor) { () -> Bool in
                    flags.started.store(true, ordering: .sequentiallyConsistent)
                    // CPU-bound on purpose: this job does not leave its loop until the second
                    // task ran somewhere else (10 s at most).
                    let deadline = ContinuousClock.now + .seconds(10)
                    while !flags.released.load(ordering: .sequentiallyConsistent) && ContinuousClock.now < deadline {}
                    return flags.released.load(ordering: .sequentiallyConsistent)
                }
                while !flags.started.load(ordering: .sequentiallyConsistent) { usleep(100) }
                usleep(20_000)  // the other loop has spun and blocked in the kernel
                // From this thread (not one of the group's): to a loop that is not blocked — the
                // one running the long job — or, if it is, to the other loop directly.
                Task(executorPreference: executor) { flags.released.store(true, ordering: .sequentiallyConsistent) }
                let sawRelease = await long.value
                #expect(sawRelease, "the second task waited for the long job to end")
            }
        }

        /// Observers and timers keep their handlers after they are invalidated: a spinner or a
        /// watch that held its lane strongly kept every lane, queue and delayed-job table alive
        /// after the executor was gone (a cycle through the handler).
        @Test("A released executor's lanes go with it, after it ran jobs and a sleep")
        func lanesGoWithTheExecutor() async throws {
            let group = try LoopThreadGroup(count: 2, name: "lanes")
            defer { group.shutdown() }
            weak var lane0: AnyObject?
            weak var lane1: AnyObject?
            do {
                let executor = LoopGroupExecutor(group: group)
                let lanes = executor.lanesForTesting
                #expect(lanes.count == 2)
                lane0 = lanes[0]
                lane1 = lanes[1]
                let ranOnALoop = await Task(executorPreference: executor) {
                    try? await Task.sleep(for: .milliseconds(2))
                    return group.threads.contains { $0.loop.isCurrentThread }
                }.value
                #expect(ranOnALoop)
            }
            // The task's last job may still be finishing on a loop: each loop runs a pass first.
            for thread in group.threads { try thread.perform(waitUntilDone: true) {} }
            #expect(lane0 == nil && lane1 == nil)
        }
    }
#endif
