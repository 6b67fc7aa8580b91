// ExecutorHookChecks — the process-wide executor hooks of the ExperimentalExecutorHooks trait: the
// main actor on the main loop (MainLoopExecutor), the default executor on loop threads
// (LoopGroupExecutor) and Task.sleep on their timers, installed by LoopExecutorFactory.runMain.
//
// The executors are the process's own and are made once, so these checks are an executable of
// their own, spawned by ExecutorHookTests (and run by .ci/run's trait build). Each check prints its
// name; any failure exits with status 1.

#if ExperimentalExecutorHooks && compiler(>=6.3)
    import LoopExecutor
    import LoopRuntime
    import Synchronization

    #if canImport(Glibc)
        import Glibc
    #endif

    // Misuse that must trap with a message (ExecutorHookTests checks the exit and the message).
    if CommandLine.arguments.dropFirst().first == "--run-main-from-a-task" {
        // runMain must own the main thread; from a task it cannot.
        Task.detached { _ = try? LoopExecutorFactory.runMain { 0 } }
        sleep(30)
        exit(0)  // not reached
    }

    // The lost-wake-up window (a loop about to block, a lane queueing work for it) widened to
    // 300 µs on every block: the checks must pass all the same.
    if CommandLine.arguments.dropFirst().first == "--widen-block-window" {
        LoopGroupExecutor.pauseBeforeLook.store(300, ordering: .relaxed)
    }

    nonisolated(unsafe) var failures = 0  // main actor (main thread) only

    @MainActor
    func check(_ name: String, _ condition: Bool) {
        print((condition ? "ok   " : "FAIL ") + name)
        if !condition { failures += 1 }
        fflush(nil)  // a hang still shows how far the checks got
    }

    /// Polls `condition` every millisecond (on loop timers now) until it holds or 20 s passed.
    func eventually(isolation: isolated (any Actor)? = #isolation, _ condition: () -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + .seconds(20)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(1))
        }
        return condition()
    }

    /// True on one of the default executor's loop threads.
    func onTheDefaultExecutor() -> Bool {
        LoopGroupExecutor.standard.group.threads.contains { $0.loop.isCurrentThread }
    }

    /// A default actor (on the default executor) that counts its calls.
    actor PlainCounter {
        private var count = 0
        func next() -> Int {
            count += 1
            return count
        }
    }

    /// How many tasks have started (shared by a check's children).
    final class StartCount: Sendable {
        let value = Atomic<Int>(0)
    }

    /// The timers of the default executor's loops (their threads run the default mode).
    func defaultExecutorTimers() -> Int {
        LoopGroupExecutor.standard.group.threads.reduce(0) { $0 + $1.loop.timerCount(forMode: .common) }
    }

    /// A log of the main thread (main-actor jobs and main-loop callouts both run there).
    final class MainLog: @unchecked Sendable {
        // Only the main thread touches `events`.
        private var events: [String] = []
        func append(_ event: String) {
            precondition(Loop.main.isCurrentThread, "MainLog used off the main thread")
            events.append(event)
        }
        var all: [String] { events }
    }

    let ranAtExit = Atomic<Bool>(false)

    /// An actor pinned to a loop thread that sleeps on its loop until the loop ends.
    actor PinnedSleeper: LoopActor {
        nonisolated let loopExecutor: LoopExecutor
        init(_ executor: LoopExecutor) { loopExecutor = executor }

        func sleepLong() async -> String {
            do {
                try await loopExecutor.loop.sleep(for: .seconds(60))
                return "slept"
            } catch is LoopEndedError {
                return "ended"
            } catch {
                return "\(error)"
            }
        }
    }

    let pausedRan = Atomic<Bool>(false)

    /// Switches the main loop to "tracking", hands the main actor a job, waits 200 ms, and switches
    /// back: whether the loop entered the mode, whether the job ran meanwhile, whether it came back.
    nonisolated func pauseMainActorWork() async throws -> (entered: Bool, ranInTracking: Bool, returned: Bool) {
        let entered = await Loop.main.switchMode(to: "tracking")
        Task { @MainActor in pausedRan.store(true, ordering: .releasing) }
        try await Task.sleep(for: .milliseconds(200))
        let ranInTracking = pausedRan.load(ordering: .acquiring)
        let returned = await Loop.main.switchMode(to: .default)
        return (entered, ranInTracking, returned)
    }

    nonisolated func sleepOnTheDefaultExecutor() async throws -> (onLoop: Bool, sawTimer: Bool) {
        let sleeping = Atomic<Bool>(false)
        let watcher = Task.detached { () -> Bool in
            await eventually { sleeping.load(ordering: .acquiring) && LoopGroupExecutor.standard.delayedJobCount >= 1 }
        }
        sleeping.store(true, ordering: .releasing)
        try await Task.sleep(for: .milliseconds(100))
        return (onTheDefaultExecutor(), await watcher.value)
    }

    let result = try LoopExecutorFactory.runMain { () async throws -> Int in
        // 1. The main actor is the main loop's.
        check("MainExecutor: runMain's body runs on the main thread", Loop.main.isCurrentThread)
        check("MainExecutor: the main loop is running the body", Loop.main.currentMode == .default)

        // 2. @MainActor jobs are jobs of the main loop's queue, in order with its blocks.
        let log = MainLog()
        Loop.main.perform(inModes: [.common]) { log.append("block") }
        Task { @MainActor in log.append("main-actor job") }
        check(
            "MainExecutor: a Task { @MainActor } is queued on the main loop",
            MainLoopExecutor.shared.pendingJobCount >= 1)
        let timer = LoopTimer(after: .milliseconds(20)) { _ in log.append("timer") }
        Loop.main.add(timer, forMode: .common)
        try await Task.sleep(for: .milliseconds(100))
        check(
            "MainExecutor: @MainActor jobs, main-loop blocks and timers all ran, in pass order: \(log.all)",
            log.all == ["block", "main-actor job", "timer"])

        // 2b. Task.sleep from main-actor code sleeps on the default executor's timers, not the main
        //     loop's (Swift 6.3's Task.sleep leaves the caller's actor first), and wakes back on the
        //     main actor. (The claim of ConcurrencyOnLoops.md and LoopExecutorFactory's comments.)
        let sleepWatcher = Task.detached { () -> (group: Bool, main: Int) in
            let onGroup = await eventually { LoopGroupExecutor.standard.delayedJobCount >= 1 }
            return (onGroup, MainLoopExecutor.shared.delayedJobCount)
        }
        try await Task.sleep(for: .milliseconds(300))
        let (sleptOnGroup, mainDelayed) = await sleepWatcher.value
        check(
            "MainExecutor: Task.sleep from the main actor is a timer of the default executor's loops (main loop's delayed jobs: \(mainDelayed))",
            sleptOnGroup && mainDelayed == 0)
        check("MainExecutor: … and the body wakes on the main thread", Loop.main.isCurrentThread)

        // 3. Observers see main-actor jobs: the main loop's metrics count them as job callouts.
        Loop.main.startRecordingMetrics()
        for _ in 0..<10 { await Task { @MainActor in }.value }
        let jobs = Loop.main.metrics.callouts[.job]?.count ?? 0
        Loop.main.stopRecordingMetrics()
        check("MainExecutor: the main loop's metrics count main-actor jobs (\(jobs))", jobs >= 10)

        // 4. A mode outside the common set pauses main-actor work; it resumes on return. (The
        //    switches run off the main actor, which cannot run while the loop is in "tracking".)
        let (entered, ranInTracking, returned) = try await pauseMainActorWork()
        check("MainExecutor: the main loop enters a non-common mode", entered)
        check("MainExecutor: main-actor work waits while the main loop runs a non-common mode", !ranInTracking)
        check("MainExecutor: the main loop is back in the default mode", returned)
        check(
            "MainExecutor: … and the paused work runs then", await eventually { pausedRan.load(ordering: .acquiring) })

        // 5. Detached tasks and task groups run on the default executor's loop threads.
        let detachedOnLoop = await Task.detached { onTheDefaultExecutor() }.value
        check("default executor: a detached task runs on a loop thread of the group", detachedOnLoop)
        let childrenOnLoops = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<16 { group.addTask { onTheDefaultExecutor() } }
            var all = true
            for await onLoop in group { all = all && onLoop }
            return all
        }
        check("default executor: task-group children run on the group's loop threads", childrenOnLoops)

        // 5b. Default-executor tasks switch into an idle default actor and back inline, as on the
        //     stock pool: a task making 1,000 calls makes no 1,000 loop jobs (issue #35 item 4;
        //     run as a task executor, every call was a job). Several tasks contending for one
        //     actor (on two loops, since loops steal) get every call answered.
        let laneLoops = LoopGroupExecutor.standard.group.threads.map(\.loop)
        func groupJobs() -> Int { laneLoops.reduce(0) { $0 + ($1.metrics.callouts[.job]?.count ?? 0) } }
        for loop in laneLoops { loop.startRecordingMetrics() }
        await Task.detached {}.value  // a job on a lane, so that recording has begun there
        let jobsBefore = groupJobs()
        let soloCalls = await Task.detached { () -> Int in
            let counter = PlainCounter()
            var last = 0
            for _ in 0..<1_000 { last = await counter.next() }
            return last
        }.value
        let callJobs = groupJobs() - jobsBefore
        for loop in laneLoops { loop.stopRecordingMetrics() }
        check("default executor: a task made 1,000 calls into a default actor (\(soloCalls))", soloCalls == 1_000)
        check("default executor: … inline, not as loop jobs (\(callJobs) jobs for 1,000 calls)", callJobs < 100)
        let contendedCalls = await Task.detached { () -> Int in
            let counter = PlainCounter()
            return await withTaskGroup(of: Int.self) { group in
                for _ in 0..<4 {
                    group.addTask {
                        var last = 0
                        for _ in 0..<250 { last = max(last, await counter.next()) }
                        return last
                    }
                }
                return await group.reduce(0, max)
            }
        }.value
        check(
            "default executor: 4 tasks made 1,000 calls into one default actor (\(contendedCalls))",
            contendedCalls == 1_000)

        // 5c. Loops steal: two children of one group that each wait until the other has started
        //     run at once, on two loops, although both were queued on their parent's loop.
        if laneLoops.count >= 2 {
            let (together, threads) = await Task.detached { () -> (Bool, Set<Int>) in
                let starts = StartCount()
                let reported = StartCount()
                return await withTaskGroup(of: (Bool, Int).self) { group in
                    for _ in 0..<2 {
                        group.addTask {
                            starts.value.add(1, ordering: .sequentiallyConsistent)
                            let lane = laneLoops.firstIndex { $0.isCurrentThread } ?? -1
                            // CPU-bound on purpose: this job does not leave its loop until the
                            // other child runs somewhere else (10 s at most).
                            let deadline = ContinuousClock.now + .seconds(10)
                            let report = ContinuousClock.now + .seconds(2)
                            while starts.value.load(ordering: .sequentiallyConsistent) < 2
                                && ContinuousClock.now < deadline
                            {
                                // Still alone after 2 s: what the loops looked like (once).
                                if ContinuousClock.now > report && reported.value.exchange(1, ordering: .relaxed) == 0 {
                                    print(
                                        "5c: alone after 2 s, lane \(lane):\n" + LoopGroupExecutor.standard.laneReport)
                                }
                            }
                            return (starts.value.load(ordering: .sequentiallyConsistent) == 2, lane)
                        }
                    }
                    var together = true
                    var threads = Set<Int>()
                    for await (sawOther, lane) in group {
                        together = together && sawOther
                        threads.insert(lane)
                    }
                    return (together, threads)
                }
            }.value
            check("default executor: a loop takes a child waiting behind a long job on another loop", together)
            check(
                "default executor: … so the two ran on two of the group's loops (\(threads.sorted()))",
                threads.count == 2 && !threads.contains(-1))
        }

        // 5d. Loops take overdue sleeps (issue #34): a task sleeps 20 ms on its loop's timers, and
        //     a task queued behind it there then holds that loop in one long CPU-bound job (up to
        //     5 s, until the sleeper is back). The sleeper must wake while the job still runs: its
        //     loop cannot fire the timer, so another loop takes it. The runner is stolen now and
        //     then before it starts (it then runs elsewhere and proves nothing): up to 20 tries.
        if laneLoops.count >= 2 {
            var provenOnTime = false
            var tries = 0
            var lastLate = Duration.zero
            while !provenOnTime && tries < 20 {
                tries += 1
                let (sleptLane, blockedLane, blockerRunning, late) = await Task.detached {
                    () -> (Int, Int, Bool, Duration) in
                    let woke = StartCount()
                    let blocking = StartCount()
                    let sleptLane = laneLoops.firstIndex { $0.isCurrentThread } ?? -1
                    let blocker = Task { () -> Int in
                        let lane = laneLoops.firstIndex { $0.isCurrentThread } ?? -1
                        blocking.value.store(1, ordering: .sequentiallyConsistent)
                        let deadline = ContinuousClock.now + .seconds(5)
                        while woke.value.load(ordering: .sequentiallyConsistent) == 0 && ContinuousClock.now < deadline
                        {}
                        blocking.value.store(2, ordering: .sequentiallyConsistent)
                        return lane
                    }
                    let deadline = ContinuousClock.now + .milliseconds(20)
                    try? await Task.sleep(until: deadline, clock: .continuous)
                    let late = ContinuousClock.now - deadline
                    let blockerRunning = blocking.value.load(ordering: .sequentiallyConsistent) == 1
                    woke.value.store(1, ordering: .sequentiallyConsistent)
                    return (sleptLane, await blocker.value, blockerRunning, late)
                }.value
                lastLate = late
                if sleptLane == blockedLane && sleptLane != -1 {
                    check(
                        "default executor: a sleep on a loop held by a long job wakes while the job runs (\(late) late, try \(tries))",
                        blockerRunning)
                    provenOnTime = true
                }
            }
            check(
                "default executor: … the long job ran on the sleeper's loop in one of \(tries) tries (last: \(lastLate) late)",
                provenOnTime)
        }

        // 5e. … and the watch that makes it so costs an idle loop no wake-ups: a task that sleeps
        //     20 times in a row wakes its own loop for each sleep, and its idle neighbour not at
        //     all (a loop puts back the watch it set on another when it blocks).
        if laneLoops.count >= 2 {
            for loop in laneLoops { loop.startRecordingMetrics() }
            await Task.detached {}.value  // a job on a lane, so that recording has begun there
            await Task.detached { for _ in 0..<20 { try? await Task.sleep(for: .milliseconds(5)) } }.value
            let timerWakeUps = laneLoops.map { $0.metrics.wakeUps.timer }
            for loop in laneLoops { loop.stopRecordingMetrics() }
            // The neighbour's count alone: a sleeping lane held off its thread for over 1 ms
            // before it blocks again (a busy machine) may wake its neighbour now and then; a watch
            // never put back would wake it once per sleep.
            check(
                "default executor: 20 sleeps in a row woke the group's loops for timers \(timerWakeUps) times (the idle one at most 5)",
                timerWakeUps.reduce(0, +) >= 10 && timerWakeUps.min()! <= 5)
        }

        // 5f. Under load, where loops take each other's overdue sleeps all the time (the parent
        //     of a big task group drains its results in long jobs): every sleep ends, none before
        //     its deadline, and no delayed job is left behind.
        let (groupSleepers, early) = await Task.detached { () -> (Int, Int) in
            await withTaskGroup(of: Bool.self) { group in
                for index in 0..<3_000 {
                    group.addTask {
                        let deadline = ContinuousClock.now + .microseconds(500 + (index &* 7_919) % 20_000)
                        try? await Task.sleep(until: deadline, clock: .continuous)
                        return ContinuousClock.now < deadline
                    }
                }
                var count = 0
                var early = 0
                for await wasEarly in group {
                    count += 1
                    if wasEarly { early += 1 }
                }
                return (count, early)
            }
        }.value
        check("default executor: 3,000 sleepers in one task group all woke (\(groupSleepers))", groupSleepers == 3_000)
        check("default executor: … none before its deadline (\(early) early)", early == 0)
        check(
            "default executor: … and no delayed job is left (\(LoopGroupExecutor.standard.delayedJobCount))",
            await eventually { LoopGroupExecutor.standard.delayedJobCount == 0 })

        // 6. Task.sleep in a task without a preference lands on the default executor's timers.
        let (sleptOnLoop, sawTimer) = try await Task.detached { try await sleepOnTheDefaultExecutor() }.value
        check("SchedulingExecutor: Task.sleep on the default executor is a timer of its loops", sawTimer)
        check("SchedulingExecutor: … and the task wakes on a loop thread of the group", sleptOnLoop)

        // 7. Cancelling such a sleep removes its timer at once.
        let timersBefore = defaultExecutorTimers()
        let sleeper = Task.detached { () -> Bool in
            do {
                try await Task.sleep(for: .seconds(600))
                return false
            } catch {
                return error is CancellationError
            }
        }
        check(
            "SchedulingExecutor: the long sleep waits in a loop timer",
            await eventually { LoopGroupExecutor.standard.delayedJobCount == 1 })
        // The sleep's job is in the table before its task suspends; a block through every loop of
        // the group runs after the task's job returned, so the cancellation finds it suspended (a
        // cancellation in between lets the task go on inline: see DelayedJobs).
        for thread in LoopGroupExecutor.standard.group.threads { _ = try? await thread.loop.submit {} }
        sleeper.cancel()
        check("SchedulingExecutor: the cancelled sleep throws CancellationError", await sleeper.value)
        check(
            "SchedulingExecutor: … and its timer is gone",
            await eventually {
                LoopGroupExecutor.standard.delayedJobCount == 0 && defaultExecutorTimers() <= timersBefore
            })

        // 8. A synchronous shutdown() called on every lane of the default executor at once, while
        //    actors pinned to the threads sleep: each sleep ends (LoopEndedError) and each
        //    shutdown returns. The woken sleepers used to be queued on the calling lanes, which
        //    were blocked in shutdown() (issue #31, case 3).
        let lanes = LoopGroupExecutor.standard.group.threads.count
        let threads = try (0..<lanes).map { _ in try LoopThread(name: "pinned") }
        let sleepers = threads.map { thread in
            let sleeper = PinnedSleeper(thread.executor)
            return Task.detached { await sleeper.sleepLong() }
        }
        check(
            "shutdown: the pinned actors sleep on their loops",
            await eventually { threads.allSatisfy { $0.loop.timerCount(forMode: .common) == 1 } })
        let shutdowns = threads.map { thread in
            Task.detached { () -> Bool in
                thread.shutdown()
                return thread.loop.hasEnded
            }
        }
        var allEnded = true
        for shutdown in shutdowns { allEnded = await shutdown.value && allEnded }
        check("shutdown: a synchronous shutdown() on every default-executor lane returns", allEnded)
        var outcomes: [String] = []
        for sleeper in sleepers { outcomes.append(await sleeper.value) }
        check(
            "shutdown: … and each pinned sleep ended with LoopEndedError: \(outcomes)",
            outcomes.allSatisfy { $0 == "ended" })

        // 9. Main-actor work handed over just before the body returns still runs (the main
        //    executor drains its queue after the stop).
        Task { @MainActor in ranAtExit.store(true, ordering: .releasing) }
        return 42
    }
    check("runMain returns what its body returned", result == 42)
    check(
        "MainExecutor: main-actor work queued as the body returned ran before runMain returned",
        ranAtExit.load(ordering: .acquiring))

    print(failures == 0 ? "all executor-hook checks passed" : "\(failures) executor-hook check(s) failed")
    exit(failures == 0 ? 0 : 1)
#else
    print(
        "ExecutorHookChecks needs the ExperimentalExecutorHooks trait: swift run --traits ExperimentalExecutorHooks ExecutorHookChecks"
    )
#endif
