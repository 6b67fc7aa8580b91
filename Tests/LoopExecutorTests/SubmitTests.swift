import LoopExecutor
import Synchronization
import Testing

@_spi(LoopExecutorSupport) @testable import LoopRuntime

private struct Refused: Error, Equatable {}

/// `submit`: a value (or an error) back from the loop's thread to an awaiting task.
@Suite("Async submit (SPEC R57)")
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

@Suite("LoopActor initialization")
struct LoopActorInitTests {
    @Test("A LoopActor's async init continues on the loop's thread once the actor is initialized")
    func asyncInitRunsOnTheLoop() async throws {
        let thread = try LoopThread(name: "affine-init")
        defer { thread.shutdown() }
        let resource = await AffineResource(thread: thread)
        #expect(await resource.wasOpenedOnLoopThread)
    }
}
