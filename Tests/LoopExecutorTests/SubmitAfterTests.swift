import LoopExecutor
import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

private struct Refused: Error, Equatable {}

/// How one `submit(after:)` ended, for the race tests: the body ran (and its value came back), or
/// it was withdrawn with an error.
private enum Answer: Equatable {
    case ran, cancelled, loopEnded
    case other(String)

    init(_ body: () async throws -> Int) async {
        do {
            _ = try await body()
            self = .ran
        } catch is CancellationError {
            self = .cancelled
        } catch is LoopEndedError {
            self = .loopEnded
        } catch {
            self = .other("\(error)")
        }
    }
}

/// `submit(after:)` (SwiftNIO's `scheduleTask`): a delayed body with a result, withdrawn by the
/// task's cancellation or the loop's end — exactly one answer, never a lost one.
@Suite("Delayed submit (SPEC R34, R75)", .timeLimit(.minutes(3)))
struct SubmitAfterTests {
    @Test("R34 submit(after:) runs the body on the loop's thread, not before the delay, and returns its value")
    func runsAfterTheDelay() async throws {
        let thread = try LoopThread(name: "submit-after")
        defer { thread.shutdown() }
        let start = thread.loop.now
        let (onThread, ranAt) = try await thread.loop.submit(after: .milliseconds(20)) {
            (Loop.current === thread.loop, Loop.current.now)
        }
        #expect(onThread)
        #expect(ranAt >= start + .milliseconds(20))  // never early
        let value = try await thread.submit(after: .zero) { 42 }
        #expect(value == 42)
    }

    @Test("submit(after:) rethrows what the body threw")
    func rethrowsTheBodysError() async throws {
        let thread = try LoopThread(name: "submit-after-err")
        defer { thread.shutdown() }
        await #expect(throws: Refused.self) {
            try await thread.loop.submit(after: .milliseconds(1)) { () throws -> Int in throw Refused() }
        }
    }

    @Test("Cancelling the task before the body started removes the timer at once; the body never runs")
    func cancellationWithdraws() async throws {
        let thread = try LoopThread(name: "submit-after-cancel")
        defer { thread.shutdown() }
        let ran = Atomic<Bool>(false)
        let submission = Task {
            try await thread.loop.submit(after: .seconds(600), label: "never") {
                ran.store(true, ordering: .relaxed)
                return 1
            }
        }
        #expect(await eventually { thread.loop.timerCount(forMode: .default) == 1 })
        submission.cancel()
        await #expect(throws: CancellationError.self) { try await submission.value }
        #expect(thread.loop.timerCount(forMode: .default) == 0)
        let ranAtAll = ran.load(ordering: .relaxed)
        #expect(!ranAtAll)
    }

    @Test("A task cancelled before the call gets CancellationError and queues nothing")
    func alreadyCancelled() async throws {
        let thread = try LoopThread(name: "submit-after-pre")
        defer { thread.shutdown() }
        let ran = Atomic<Bool>(false)
        let submission = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await thread.loop.submit(after: .zero) {
                ran.store(true, ordering: .relaxed)
                return 1
            }
        }
        await #expect(throws: CancellationError.self) { try await submission.value }
        #expect(thread.loop.timerCount(forMode: .default) == 0)
        let ranAtAll = ran.load(ordering: .relaxed)
        #expect(!ranAtAll)
    }

    @Test("A cancellation that comes once the body has started changes nothing: its value comes back")
    func cancellationAfterTheStart() async throws {
        let thread = try LoopThread(name: "submit-after-late")
        defer { thread.shutdown() }
        let started = Atomic<Bool>(false)
        let release = Atomic<Bool>(false)
        let submission = Task {
            try await thread.loop.submit(after: .zero) { () -> Int in
                started.store(true, ordering: .releasing)
                while !release.load(ordering: .acquiring) { usleep(100) }
                return 7
            }
        }
        #expect(await eventually { started.load(ordering: .acquiring) })
        submission.cancel()
        release.store(true, ordering: .releasing)
        #expect(try await submission.value == 7)
    }

    @Test("R75 a delayed submission fires only in its modes")
    func firesOnlyInItsModes() async throws {
        let thread = try LoopThread(name: "submit-after-mode")
        defer { thread.shutdown() }
        let ran = Atomic<Bool>(false)
        let submission = Task {
            try await thread.loop.submit(after: .zero, inModes: ["private"]) {
                ran.store(true, ordering: .relaxed)
                return "private"
            }
        }
        #expect(await eventually { thread.loop.timerCount(forMode: "private") == 1 })
        try await Task.sleep(for: .milliseconds(20))  // the thread runs .default meanwhile
        let ranAtAll = ran.load(ordering: .relaxed)
        #expect(!ranAtAll)
        try thread.perform { Loop.current.run("private", for: .milliseconds(1)) }
        #expect(try await submission.value == "private")
    }

    @Test("A shutdown before the body started ends the submission with LoopEndedError; after the start, the value")
    func shutdownWithdraws() async throws {
        let thread = try LoopThread(name: "submit-after-end")
        let ran = Atomic<Bool>(false)
        let submission = Task {
            try await thread.loop.submit(after: .seconds(600)) {
                ran.store(true, ordering: .relaxed)
                return 1
            }
        }
        #expect(await eventually { thread.loop.timerCount(forMode: .default) == 1 })
        await thread.shutdown()
        await #expect(throws: LoopEndedError.self) { try await submission.value }
        let ranAtAll = ran.load(ordering: .relaxed)
        #expect(!ranAtAll)
        // And on a loop that has ended, at once.
        await #expect(throws: LoopEndedError.self) { try await thread.loop.submit(after: .zero) { 1 } }
        await #expect(throws: LoopEndedError.self) { try await thread.submit(after: .zero) { 1 } }
    }

    @Test(
        "Racing the timer, cancellation gives exactly one answer: the value with one run, or CancellationError with none (×300)"
    )
    func cancellationRace() async throws {
        let thread = try LoopThread(name: "submit-after-race")
        defer { thread.shutdown() }
        var seen: Set<String> = []
        for round in 0..<300 {
            let runs = Atomic<Int>(0)
            let submission = Task {
                await Answer {
                    try await thread.loop.submit(after: .microseconds(round % 7 * 10)) {
                        runs.add(1, ordering: .relaxed)
                        return round
                    }
                }
            }
            if round % 3 != 0 { usleep(UInt32(round % 5 * 10)) }
            submission.cancel()
            let answer = await submission.value
            switch answer {
            case .ran:
                let count = runs.load(ordering: .relaxed)
                #expect(count == 1)
            case .cancelled:
                let count = runs.load(ordering: .relaxed)
                #expect(count == 0)
            default: Issue.record("round \(round): \(answer)")
            }
            seen.insert("\(answer)")
        }
        // Nothing is left behind: no timer, whatever won.
        #expect(await eventually { thread.loop.timerCount(forMode: .default) == 0 })
        #expect(seen.contains("cancelled"))
    }

    @Test(
        "Racing the timer, a shutdown gives exactly one answer: the value with one run, or LoopEndedError with none (×200)"
    )
    func shutdownRace() async throws {
        for round in 0..<200 {
            let thread = try LoopThread(name: "submit-after-sd")
            let runs = Atomic<Int>(0)
            let submission = Task {
                await Answer {
                    try await thread.loop.submit(after: .microseconds(round % 5 * 20)) {
                        runs.add(1, ordering: .relaxed)
                        return round
                    }
                }
            }
            if round % 2 == 0 { usleep(UInt32(round % 7 * 15)) }
            await thread.shutdown()
            let answer = await submission.value
            switch answer {
            case .ran:
                let count = runs.load(ordering: .relaxed)
                #expect(count == 1)
            case .loopEnded:
                let count = runs.load(ordering: .relaxed)
                #expect(count == 0)
            default: Issue.record("round \(round): \(answer)")
            }
        }
    }

    @Test("An actor pinned to the loop awaits its own loop's delayed submission and resumes on it")
    func fromAPinnedActor() async throws {
        let thread = try LoopThread(name: "submit-after-actor")
        defer { thread.shutdown() }
        let actor = DelayedSubmitter(thread.executor)
        #expect(await actor.submitToOwnLoop() == "ran on loop, back on loop")
    }

    @Test("submit(after:) with an empty mode list traps")
    func emptyModes() async {
        await #expect(processExitsWith: .failure) {
            let thread = try LoopThread(name: "submit-after-empty")
            _ = try await thread.loop.submit(after: .zero, inModes: []) { 1 }
        }
    }

    @Test("submit(after:) with a negative tolerance traps")
    func negativeTolerance() async {
        await #expect(processExitsWith: .failure) {
            let thread = try LoopThread(name: "submit-after-tol")
            _ = try await thread.loop.submit(after: .zero, tolerance: .milliseconds(-1)) { 1 }
        }
    }
}

/// An actor pinned to a loop thread that submits delayed work to its own thread.
private actor DelayedSubmitter: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    init(_ executor: LoopExecutor) { loopExecutor = executor }

    func submitToOwnLoop() async -> String {
        let loop = loopExecutor.loop
        let ranOnLoop = (try? await loop.submit(after: .milliseconds(1)) { loop.isCurrentThread }) ?? false
        return
            "\(ranOnLoop ? "ran on loop" : "ran elsewhere"), \(loop.isCurrentThread ? "back on loop" : "back elsewhere")"
    }
}

/// `LoopThreadGroup.shutdown()` awaited: every thread drains and ends; nothing accepted is lost.
@Suite("Async group shutdown", .timeLimit(.minutes(3)))
struct GroupShutdownTests {
    @Test(
        "await group.shutdown() runs every block accepted before it and ends every thread; a second call returns at once"
    )
    func endsEveryThread() async throws {
        let group = try LoopThreadGroup(count: 3, name: "async-sd")
        let ran = Atomic<Int>(0)
        for thread in group.threads {
            for _ in 0..<10 {
                try thread.perform {
                    usleep(200)
                    ran.add(1, ordering: .relaxed)
                }
            }
        }
        await group.shutdown()
        let total = ran.load(ordering: .relaxed)
        #expect(total == 30)
        #expect(group.threads.allSatisfy { !$0.isOpen && $0.loop.hasEnded })
        await group.shutdown()
        #expect(throws: LoopThreadError.self) { try group.next().perform {} }
    }

    @Test(
        "await group.shutdown() from an actor pinned to one of the group's threads requests every shutdown and returns")
    func fromAThreadOfTheGroup() async throws {
        let group = try LoopThreadGroup(count: 2, name: "async-sd-own")
        let actor = GroupCloser(group.threads[0].executor)
        await actor.closeGroup(group)
        #expect(await eventually { group.threads.allSatisfy { $0.loop.hasEnded } })
        await group.shutdown()  // idempotent
    }
}

private actor GroupCloser: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    init(_ executor: LoopExecutor) { loopExecutor = executor }

    func closeGroup(_ group: LoopThreadGroup) async {
        await group.shutdown()
    }
}
