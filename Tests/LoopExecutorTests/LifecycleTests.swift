import Dispatch
import LoopExecutor
import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// An actor pinned to a loop whose every job queues another: work that never runs dry.
actor Respawner: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    init(_ executor: LoopExecutor) { loopExecutor = executor }

    func respawn() {
        Task { self.respawn() }
    }
}

/// An actor pinned to a loop thread that waits in the loop's async bridges.
actor Waiter: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    init(_ executor: LoopExecutor) { loopExecutor = executor }

    func sleepLong() async -> String {
        do {
            try await loopExecutor.loop.sleep(for: .seconds(30))
            return "slept"
        } catch is LoopEndedError {
            return "ended"
        } catch {
            return "\(error)"
        }
    }

    func countTicks() async -> Int {
        var count = 0
        for await _ in loopExecutor.loop.ticks(every: .seconds(10)) { count += 1 }
        return count
    }

    /// Counts the loop's activities until the calling task is cancelled (which ends the stream).
    func countActivitiesUntilCancelled() async -> Int {
        var count = 0
        for await _ in loopExecutor.loop.activities() { count += 1 }
        return count
    }

    func drainActivities() async -> Bool {
        for await _ in loopExecutor.loop.activities([.beforeWaiting]) {}
        return true
    }
}

@Suite("Lifecycle of loop threads seen from async code", .timeLimit(.minutes(3)))
struct LifecycleTests {
    @Test("Dropping a LoopThread while a task keeps calling an actor pinned to it does not crash (×300)")
    func droppingThreadKeepsPinnedActorsServed() async {
        // A child process: before the fix this trapped the whole process.
        await #expect(processExitsWith: .success) {
            func useAndDrop() throws -> Task<Int, Never> {
                let thread = try LoopThread(name: "dropped")
                let actor = Pinned(thread.executor)
                let task = Task {
                    for _ in 0..<20 { await actor.call() }
                    return await actor.calls
                }
                return task  // the function "throws early": the LoopThread is released here
            }
            for _ in 0..<300 {
                let calls = await (try useAndDrop()).value
                precondition(calls == 20, "lost calls: \(calls)")
            }
            // Every thread ends once its actor is gone.
            let deadline = ContinuousClock.now + .seconds(20)
            while threadCount() > 40 && ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(5)) }
            precondition(threadCount() <= 40, "threads left behind: \(threadCount())")
        }
    }

    // Two causes made this trap or hang before: a resumed waiter reaches its actor through the
    // global pool, so its hop onto the loop came after the seal (now the resumer takes a seal hold,
    // Locked+Resume.swift); and a job enqueued between the drain's "nothing queued" and the queue's
    // close was lost (now the seal holds every queue's lock at once). LOOP_LIFECYCLE_ROUNDS=3000
    // soaks it.
    @Test("Shutdown resumes pinned actors waiting in sleep, ticks and activities, and completes (×1000)")
    func shutdownResumesPinnedWaiters() async {
        // A child process: a regression traps (a job enqueued after the end) or hangs, and must be
        // reported rather than take the suite down. Preconditions say which expectation failed.
        await #expect(processExitsWith: .success) {
            let rounds = Int(getenv("LOOP_LIFECYCLE_ROUNDS").map { String(cString: $0) } ?? "1000") ?? 1000
            for round in 0..<rounds {
                let thread = try LoopThread(name: "waiters")
                let waiter = Waiter(thread.executor)
                async let slept = waiter.sleepLong()
                async let ticks = waiter.countTicks()
                async let drained = waiter.drainActivities()
                // All three are waiting (an actor call that had not reached the actor yet would be
                // an enqueue after the shutdown: the one remaining programmer error).
                let ready = await eventually {
                    thread.loop.lock.withLock { thread.loop.state.endHandlers.count } == 3
                }
                precondition(ready, "round \(round): the three waiters did not start")
                await thread.shutdown()
                let (sleepResult, tickCount, streamEnded) = await (slept, ticks, drained)
                precondition(sleepResult == "ended", "round \(round): the sleep did not end with LoopEndedError")
                precondition(tickCount == 0, "round \(round): ticks were delivered")
                precondition(streamEnded, "round \(round): the activity stream did not end")
                precondition(thread.loop.hasEnded, "round \(round): the loop has not ended")
            }
        }
    }

    @Test("withMode and switchMode racing shutdown return or throw LoopEndedError, never trap (×300)")
    func modeSwitchingRacingShutdown() async {
        // A child process: before the fix this trapped (a regression must be reported, not end the
        // suite). Preconditions say which expectation failed.
        await #expect(processExitsWith: .success) {
            for round in 0..<300 {
                let thread = try LoopThread(name: "switching")
                let loop = thread.loop
                let switcher = Task {
                    do {
                        try await loop.withMode("tracking") { try? await Task.sleep(for: .microseconds(200)) }
                    } catch is LoopEndedError {}
                    await loop.switchMode(to: "other")
                }
                if round % 2 == 0 { try await Task.sleep(for: .microseconds(100)) }
                await thread.shutdown()
                _ = await switcher.result
                let switched = await loop.switchMode(to: "late")
                precondition(!switched, "round \(round): switchMode on an ended loop returned true")
                do {
                    try await loop.withMode("late") {}
                    preconditionFailure("round \(round): withMode on an ended loop ran its body")
                } catch {
                    precondition(error is LoopEndedError, "round \(round): withMode threw \(error)")
                }
            }
        }
    }

    /// Issue #31, case 3: the shutdown ended the pinned actor's sleep from the calling thread, and
    /// the woken task went through the cooperative pool — whose last free thread was the one
    /// blocked in `shutdown()` — while the drain waited for it: a hang. A parked waiter is woken on
    /// its own loop, so the shutdown completes with the pool full.
    @Test("A synchronous shutdown from the pool's last free thread ends a pinned actor's sleep and returns")
    func shutdownFromTheLastPoolThread() async {
        await #expect(processExitsWith: .success) {
            // A hang must fail the check, not the whole run.
            _ = try PlatformThread.spawn(name: "watchdog") {
                sleep(20)
                exit(3)
            }
            let thread = try LoopThread(name: "pinned")
            let waiter = Waiter(thread.executor)
            let slept = Task.detached { await waiter.sleepLong() }
            let sleeping = await eventually { thread.loop.timerCount(forMode: .common) == 1 }
            precondition(sleeping, "the sleep never began")
            // Every thread of the cooperative pool but one blocks; the last one calls shutdown().
            let width = LoopThreadGroup.processorCount
            let gate = DispatchSemaphore(value: 0)
            let occupied = DispatchSemaphore(value: 0)
            for _ in 0..<(width - 1) {
                Task.detached {
                    occupied.signal()
                    gate.wait()
                }
            }
            for _ in 0..<(width - 1) { await occupied.waitAsync() }
            await Task.detached { thread.shutdown() }.value
            for _ in 0..<(width - 1) { gate.signal() }
            let outcome = await slept.value
            precondition(outcome == "ended", "the sleep ended with \(outcome)")
            precondition(thread.loop.hasEnded)
        }
    }

    /// Issue #31, case 8: a plain thread's exit closed its loop's job queues with jobs in them,
    /// and their tasks waited for ever; now the exit traps, naming the executor and its jobs.
    @Test("A thread that exits with executor jobs queued on its loop traps, naming the executor")
    func threadExitWithQueuedJobsTraps() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let queued = DispatchSemaphore(value: 0)
            let thread = try PlatformThread.spawn(name: "leaves-jobs") {
                let executor = LoopExecutor(loop: .current, label: "left behind")
                let pinned = Pinned(executor)
                Task.detached { await pinned.call() }
                while executor.pendingJobCount == 0 { sched_yield() }
                queued.signal()
                // The thread exits without running its loop: the job can never run.
            }
            queued.wait()
            thread.join()
        }
        let message = String(decoding: exit.standardErrorContent, as: UTF8.self)
        #expect(message.contains("its thread exited, with jobs still queued"))
        #expect(message.contains("executor 'left behind'"))
        #expect(message.contains("1 job(s)"))
    }

    /// The same for a shutdown whose drain is cut off after 10,000 rounds: work that queues more
    /// work for ever is stopped, but not by dropping the tasks it queued.
    @Test("A drain cut off after 10,000 rounds with jobs still queued traps, naming the executor")
    func cutOffDrainWithQueuedJobsTraps() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let thread = try LoopThread(name: "never-dry")
            let spinner = Respawner(thread.loop.executor)
            await spinner.respawn()
            await thread.shutdown()
        }
        let message = String(decoding: exit.standardErrorContent, as: UTF8.self)
        #expect(message.contains("drain never ran dry"))
        #expect(message.contains("job(s)"))
    }

    @Test("An activity stream iterated by an actor pinned to the same loop lets the loop go idle")
    func ownLoopActivitiesGoIdle() async throws {
        let thread = try LoopThread(name: "observed")
        let waiter = Waiter(thread.executor)
        // Before the fix: hundreds of thousands of events in half a second, the loop at 100% CPU.
        let counter = Task { await waiter.countActivitiesUntilCancelled() }
        try await Task.sleep(for: .milliseconds(500))
        counter.cancel()
        let counted = await counter.value
        #expect(counted < 50, "the loop did not go idle: \(counted) events in 500 ms")
        await thread.shutdown()
    }

    @Test("A second task waiting on the same tick or activity iterator traps, naming the sequence")
    func secondConsumerTraps() async throws {
        let ticks = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let thread = try LoopThread(name: "two-consumers")
            nonisolated(unsafe) let iterator = thread.loop.ticks(every: .seconds(60)).makeAsyncIterator()
            try await waitTwice {
                var mine = iterator
                _ = await mine.next()
            }
        }
        #expect(String(decoding: ticks.standardErrorContent, as: UTF8.self).contains("LoopTicks: two tasks"))
        let activities = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let thread = try LoopThread(name: "two-consumers")
            // A mode the loop never runs: no event can resume the first consumer before the second
            // arrives (an `.entry` of the default mode did, when the thread started late).
            nonisolated(unsafe) let iterator = thread.loop.activities(.allActivities, inModes: ["never-run"])
                .makeAsyncIterator()
            try await waitTwice {
                var mine = iterator
                _ = await mine.next()
            }
        }
        #expect(
            String(decoding: activities.standardErrorContent, as: UTF8.self).contains("LoopActivities: two tasks"))
    }

    @Test("Negative tolerances trap with a message naming the call the user made")
    func negativeTolerancesTeach() async throws {
        let ticks = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = Loop.main.ticks(every: .seconds(1), tolerance: .milliseconds(-1))
        }
        #expect(
            String(decoding: ticks.standardErrorContent, as: UTF8.self).contains("Loop.ticks(every:tolerance:inModes:)")
        )
        let sleep = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            try await Loop.main.sleep(for: .seconds(1), tolerance: .milliseconds(-1))
        }
        #expect(
            String(decoding: sleep.standardErrorContent, as: UTF8.self).contains("Loop.sleep(for:tolerance:inModes:)"))
    }

    @Test("After shutdown(), an enqueue traps naming the loop and the thread that shut it down")
    func lateEnqueueMessage() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let thread = try LoopThread(name: "late")
            let actor = Pinned(thread.executor)
            await thread.shutdown()
            await actor.call()
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("shutdown() was called on thread"))
        #expect(message.contains("loop of thread 'late'"))
    }
}

/// The number of threads of this process.
func threadCount() -> Int {
    guard let directory = opendir("/proc/self/task") else { return -1 }
    defer { closedir(directory) }
    var count = 0
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { $0.first }
        if name != UInt8(ascii: ".") { count += 1 }
    }
    return count
}

/// Makes a first task and then a second one wait in `next` (in whichever order they arrive, the
/// second must trap). Without the trap both would wait for ever: after 20 s the process exits
/// "successfully" instead, which fails the exit test rather than hanging it.
private func waitTwice(_ next: @escaping @Sendable () async -> Void) async throws {
    let first = Task { await next() }
    DispatchQueue.global().asyncAfter(deadline: .now() + 20) { exit(0) }
    try await Task.sleep(for: .milliseconds(100))
    await next()
    first.cancel()
}
