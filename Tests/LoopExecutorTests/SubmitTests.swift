import LoopExecutor
import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

private struct Refused: Error, Equatable {}

/// A flag a submitted body raises.
final class SubmitFlag: Sendable {
    let value = Atomic<Bool>(false)
}

/// An actor pinned to a loop thread that submits work to its own thread.
actor Submitter: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    init(_ executor: LoopExecutor) { loopExecutor = executor }

    func submitAcrossShutdown(_ thread: LoopThread, started: SubmitFlag) async -> String {
        do {
            try await thread.submit {
                started.value.store(true, ordering: .releasing)
                usleep(2_000)  // the shutdown begins meanwhile
            }
            precondition(loopExecutor.loop.isCurrentThread, "the reply did not come back on the loop")
            return "ran"
        } catch {
            return "\(error)"
        }
    }
}

/// `submit`: a value (or an error) back from the loop's thread to an awaiting task.
@Suite("Async submit (SPEC R57)", .timeLimit(.minutes(3)))
struct SubmitTests {
    @Test("submit runs the body on the loop's thread and returns its value")
    func returnsValue() async throws {
        let thread = try LoopThread(name: "submit-value")
        defer { thread.shutdown() }
        let onThread = try await thread.submit { Loop.current === thread.loop }
        #expect(onThread)
        let sum = try await thread.loop.submit { (1...100).reduce(0, +) }
        #expect(sum == 5050)
    }

    @Test("submit rethrows what the body threw")
    func rethrowsTheBodysError() async throws {
        let thread = try LoopThread(name: "submit-error")
        defer { thread.shutdown() }
        await #expect(throws: Refused.self) {
            try await thread.submit { () throws -> Int in throw Refused() }
        }
        await #expect(throws: Refused.self) {
            try await thread.loop.submit { () throws -> Int in throw Refused() }
        }
    }

    @Test("R57 a submitted body waits for one of its modes")
    func waitsForItsMode() async throws {
        let thread = try LoopThread(name: "submit-mode")
        defer { thread.shutdown() }
        let ran = Mutex(false)
        let result = Task {
            try await thread.loop.submit(inModes: ["private"]) {
                ran.withLock { $0 = true }
                return "ran in private"
            }
        }
        // The thread runs .default: the body stays queued until a run of "private".
        try await Task.sleep(for: .milliseconds(30))
        #expect(!ran.withLock { $0 })
        let ranInPrivate = await eventually {
            try? thread.perform { Loop.current.run("private", for: .zero) }
            return ran.withLock { $0 }
        }
        #expect(ranInPrivate)
        #expect(try await result.value == "ran in private")
    }

    /// Issue #31, case 4: the reply to a pinned actor's `submit` came back through the global
    /// pool after the drain had sealed the loop, and the hop onto the actor trapped.
    @Test("A pinned actor's submit answered in its loop's shutdown drain gets its reply (×100)")
    func pinnedSubmitAcrossShutdown() async {
        await #expect(processExitsWith: .success) {
            for round in 0..<100 {
                let thread = try LoopThread(name: "submit-drain")
                let submitter = Submitter(thread.executor)
                let bodyStarted = SubmitFlag()
                let reply = Task.detached { await submitter.submitAcrossShutdown(thread, started: bodyStarted) }
                while !bodyStarted.value.load(ordering: .acquiring) { await Task.yield() }
                await thread.shutdown()  // begins while the body runs: the reply comes in the drain
                let outcome = await reply.value
                precondition(outcome == "ran", "round \(round): \(outcome)")
            }
        }
    }

    @Test("After a LoopThread's shutdown, submit throws LoopThreadError.shutDown; Loop.submit LoopEndedError")
    func afterShutdown() async throws {
        let thread = try LoopThread(name: "submit-ended")
        let loop = thread.loop
        await thread.shutdown()
        let refused = await #expect(throws: LoopThreadError.self) { try await thread.submit { 1 } }
        #expect(refused == .shutDown(thread: "submit-ended"))
        let ended = await #expect(throws: LoopEndedError.self) { try await loop.submit { 1 } }
        #expect(ended?.loop == loop.description)
    }

    @Test("A body accepted before a shutdown runs in its drain and its value is returned")
    func acceptedBeforeShutdown() async throws {
        for round in 0..<200 {
            let thread = try LoopThread(name: "submit-drain")
            async let value = thread.submit { round }
            async let stop: Void = thread.shutdown()
            // Either answer is right; a hang or a lost body is not.
            do {
                #expect(try await value == round)
            } catch let error as LoopThreadError {
                #expect(error == .shutDown(thread: "submit-drain"))
            }
            await stop
        }
    }
}

/// The pattern `LoopActor`'s documentation shows: a thread-affine handle opened in an async init,
/// after the executor is set, runs on the loop's thread.
private actor AffineResource: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    private var openedOnLoopThread = false

    init(thread: LoopThread) async {
        loopExecutor = thread.executor
        // `self` is fully initialized: the rest of this init runs on the actor's executor.
        openedOnLoopThread = thread.loop.isCurrentThread
    }

    var wasOpenedOnLoopThread: Bool { openedOnLoopThread }
}

@Suite("LoopActor initialization", .timeLimit(.minutes(3)))
struct LoopActorInitTests {
    @Test("A LoopActor's async init continues on the loop's thread once the actor is initialized")
    func asyncInitRunsOnTheLoop() async throws {
        let thread = try LoopThread(name: "affine-init")
        defer { thread.shutdown() }
        let resource = await AffineResource(thread: thread)
        #expect(await resource.wasOpenedOnLoopThread)
    }
}
