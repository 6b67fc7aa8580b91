import Dispatch
import LoopExecutor
import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

@Suite("LoopExecutor (SPEC N1–N4)", .serialized, .timeLimit(.minutes(3)))
struct LoopExecutorTests {
    static let callsPerTask = Int(getenv("LOOP_STRESS_ITERATIONS").map { String(cString: $0) } ?? "") ?? 100_000

    @Test("N1 a pinned actor runs on the loop's thread")
    func runsOnLoopThread() async throws {
        let thread = try LoopThread(name: "pinned")
        defer { thread.shutdown() }
        let actor = Pinned(thread.executor)
        #expect(await actor.onLoopThread())
        await actor.call()
        #expect(await actor.wrongThread == 0)
    }

    @Test("N1 four tasks × many calls: none lost, FIFO per caller, all on the loop's thread")
    func manyCalls() async throws {
        let thread = try LoopThread(name: "busy")
        defer { thread.shutdown() }
        let actor = Pinned(thread.executor)
        let perTask = Self.callsPerTask
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<4 {
                group.addTask {
                    for sequence in 0..<perTask {
                        await actor.call(sender: sender, sequence: sequence)
                    }
                }
            }
        }
        #expect(await actor.calls == 4 * perTask)
        #expect(await actor.outOfOrder == 0)
        #expect(await actor.wrongThread == 0)
    }

    @Test("Shared executors: one per loop and mode list")
    func sharedExecutors() throws {
        let thread = try LoopThread(name: "shared")
        defer { thread.shutdown() }
        #expect(thread.executor === thread.loop.executor)
        #expect(thread.loop.executor(inModes: [.common]) === thread.loop.executor)
        #expect(thread.loop.executor(inModes: [.default]) !== thread.loop.executor)
        #expect(thread.loop.executor(inModes: [.default]).modes == [.default])
    }

    @Test("Mode-aware: an actor pinned to .default pauses while the loop runs another mode")
    func modeAware() async throws {
        let thread = try LoopThread(name: "modes")
        defer { thread.shutdown() }
        let tracking: Loop.Mode = "tracking"
        let actor = Pinned(thread.loop.executor(inModes: [.default]))
        let trace = Trace()
        let entered = DispatchSemaphore(value: 0)
        let leave = DispatchSemaphore(value: 0)
        // The loop enters "tracking" (a nested run) until told to leave.
        try thread.perform(inModes: [.default]) {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: tracking)  // keeps "tracking" alive
            let poll = LoopTimer(fireAt: .now, interval: .milliseconds(2)) { _ in
                if leave.wait(timeout: .now()) == .success { loop.stop() }
            }
            loop.add(poll, forMode: tracking)
            entered.signal()
            trace.append("tracking-start")
            loop.run(tracking)
            trace.append("tracking-end")
            poll.invalidate()
        }
        await entered.waitAsync()
        let call = Task {
            await actor.call()
            trace.append("call-done")
        }
        // While the loop tracks, the call waits (the job is queued, not run).
        try await Task.sleep(for: .milliseconds(100))
        #expect(trace.text == "tracking-start")
        #expect(actor.loopExecutor.pendingJobCount >= 1)
        leave.signal()
        await call.value
        #expect(trace.text == "tracking-start tracking-end call-done")
    }

    @Test("N3 a nested run inside a job does not run the same executor's jobs")
    func noReentrancy() async throws {
        let thread = try LoopThread(name: "nested")
        defer { thread.shutdown() }
        let actor = Nesting(thread.executor)
        let trace = await actor.runNested()
        #expect(trace == ["outer-start", "nested-run-done", "outer-end", "second"])
    }

    @Test("assumeIsolated works in a timer callout of the loop")
    func assumeIsolatedInTimer() async throws {
        let thread = try LoopThread(name: "assume")
        defer { thread.shutdown() }
        let actor = Pinned(thread.executor)
        await actor.call()
        let seen = Trace()
        let fired = DispatchSemaphore(value: 0)
        thread.loop.add(
            LoopTimer(after: .milliseconds(1)) { _ in
                let calls = actor.assumeIsolated { $0.calls }
                seen.append("calls=\(calls)")
                fired.signal()
            }, forMode: .default)
        await fired.waitAsync()
        #expect(seen.text == "calls=1")
    }

    @Test("withTaskExecutorPreference runs nonisolated async code on the loop's thread")
    func taskExecutorPreference() async throws {
        let thread = try LoopThread(name: "preference")
        defer { thread.shutdown() }
        let loop = thread.loop
        let onLoop = await withTaskExecutorPreference(thread.executor) {
            await nonisolatedWork(loop)
        }
        #expect(onLoop)
    }

    @Test(
        "A task preferring the loop passes between its nonisolated frames without a loop job each, and still reaches pinned actors (issue #35)"
    )
    func preferenceFramesDoNotHop() async throws {
        let thread = try LoopThread(name: "frames")
        defer { thread.shutdown() }
        let loop = thread.loop
        let pinned = Pinned(thread.executor)
        try thread.perform(waitUntilDone: true) {}
        loop.startRecordingMetrics()
        let (onLoop, depth) = await withTaskExecutorPreference(thread.executor) {
            (await nonisolatedWork(loop), await nestedFrames(200, loop))
        }
        try thread.perform(waitUntilDone: true) {}
        let jobs = loop.metrics[.job].count
        loop.stopRecordingMetrics()
        #expect(onLoop && depth == 200)
        // Two hundred nested frames, each entered and left on the loop's thread: a handful of jobs
        // (the task's arrival), not one or two per frame as when the task ran as the serial
        // executor.
        #expect(jobs < 20, "\(jobs) loop jobs for 200 nonisolated frames")
        // From a preferring task to a pinned actor and back: the actor's own door.
        let called = await withTaskExecutorPreference(thread.executor) { () async -> (Bool, Int) in
            await pinned.call()
            return (await pinned.onLoopThread(), await pinned.calls)
        }
        #expect(called == (true, 1))
    }

    @Test("Tasks created with the loop executor as their preference release it as they end (×200)")
    func taskPreferenceRetainsTheExecutorItWasGiven() async throws {
        let thread = try LoopThread(name: "task-preference")
        defer { thread.shutdown() }
        weak var weakExecutor: LoopExecutor?
        do {
            let executor = LoopExecutor(loop: thread.loop)
            weakExecutor = executor
            let tasks = (0..<200).map { _ in
                Task(executorPreference: executor) { await nonisolatedWork(thread.loop) }
            }
            for task in tasks { #expect(await task.value) }
        }
        // The tasks' retains were balanced by the runtime's releases: the executor is gone.
        #expect(await eventually { weakExecutor == nil })
    }

    @Test("N1 running jobs counts as a handled source")
    func jobsAreHandledSources() async throws {
        let loopBox = LoopBox()
        let started = DispatchSemaphore(value: 0)
        let result = LoopBox()
        let runner = try PlatformThread.spawn(name: "handled") {
            let loop = Loop.current
            loopBox.loop = loop
            loop.add(LoopSource {}, forMode: .default)
            started.signal()
            result.result = loop.run(.default, for: .seconds(30), returnAfterSourceHandled: true)
            started.signal()
        }
        defer { runner.join() }
        await started.waitAsync()
        let actor = Pinned(loopBox.loop!.executor)
        Task { await actor.call() }
        await started.waitAsync()
        #expect(result.result == .handledSource)
    }

    @Test("N4 an executor with queued jobs keeps its mode alive; an idle one does not")
    func keepsModeAlive() async throws {
        let loopBox = LoopBox()
        let ready = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let results = Trace()
        let runner = try PlatformThread.spawn(name: "alive") {
            let loop = Loop.current
            loopBox.loop = loop
            _ = loop.executor(inModes: ["jobs"])
            results.append("idle:\(loop.run("jobs", for: .seconds(5)))")
            ready.signal()
            go.wait()
            results.append("busy:\(loop.run("jobs", for: .zero))")
            ready.signal()
        }
        defer { runner.join() }
        await ready.waitAsync()
        let actor = Pinned(loopBox.loop!.executor(inModes: ["jobs"]))
        let call = Task { await actor.call() }
        #expect(await eventually { actor.loopExecutor.pendingJobCount == 1 })
        go.signal()
        await ready.waitAsync()
        await call.value
        #expect(results.text == "idle:finished busy:timedOut")
    }

    @Test("Shutdown runs every job enqueued before it")
    func shutdownRunsPendingJobs() async throws {
        let thread = try LoopThread(name: "drain")
        let trace = Trace()
        let gate = DispatchSemaphore(value: 0)
        try thread.perform { gate.wait() }  // hold the loop so that jobs pile up
        // Tasks preferring the loop's executor enqueue their first job on it at once.
        let tasks = (0..<20).map { number in
            Task(executorPreference: thread.executor) { trace.append("\(number)") }
        }
        #expect(thread.executor.pendingJobCount == 20)
        gate.signal()
        await thread.shutdown()
        #expect(trace.all.count == 20)  // all ran before the thread ended
        #expect(thread.executor.pendingJobCount == 0)
        for task in tasks { await task.value }
    }

    @Test("An enqueue after the loop's thread ended traps with a message naming the loop")
    func enqueueAfterEndTraps() async {
        await #expect(processExitsWith: .failure) {
            let thread = try LoopThread(name: "ended")
            let actor = Pinned(thread.executor)
            await thread.shutdown()
            await actor.call()
        }
    }
}

/// An actor that records into a trace readable from outside.
actor Recorder: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    nonisolated let trace: Trace

    init(_ executor: LoopExecutor, _ trace: Trace) {
        loopExecutor = executor
        self.trace = trace
    }

    func record(_ event: String) { trace.append(event) }
}

final class LoopBox: @unchecked Sendable {
    // Written before a semaphore signal, read after the matching wait.
    var loop: Loop?
    var result: Loop.RunResult?
}

/// Nonisolated async work: where does it run?
nonisolated func nonisolatedWork(_ loop: Loop) async -> Bool {
    await Task.yield()
    return loop.isCurrentThread
}

actor Nesting: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    private var trace: [String] = []

    init(_ executor: LoopExecutor) { loopExecutor = executor }

    func second() { trace.append("second") }

    func runNested() async -> [String] {
        trace.append("outer-start")
        let other = Task { self.second() }  // isolated to this actor: enqueued on its executor
        // A nested run inside this job: `second` must not run now (SPEC N3).
        loopExecutor.loop.run(.default, for: .milliseconds(50))
        trace.append("nested-run-done")
        trace.append("outer-end")
        await other.value
        return trace
    }
}

/// `depth` nested nonisolated async frames; counts those that ran on `loop`'s thread.
@inline(never)
nonisolated func nestedFrames(_ depth: Int, _ loop: Loop) async -> Int {
    let here = loop.isCurrentThread ? 1 : 0
    guard depth > 1 else { return here }
    return here + (await nestedFrames(depth - 1, loop))
}
