import LoopExecutor
import Testing

@testable import LoopRuntime

/// One error for a loop's end: every call that tells it — a thread's perform, a port's send, an
/// async wait — converts to `LoopEndedError`, with the reason when the loop knows it.
@Suite("LoopEndedError: one answer for a loop's end", .timeLimit(.minutes(3)))
struct LoopEndedErrorTests {
    @Test("After a shutdown, a thread's perform, a sleep and a submit all tell LoopEndedError, reason shutDown")
    func afterShutdown() async throws {
        let thread = try LoopThread(name: "ended-sd")
        await thread.shutdown()
        let performError = #expect(throws: LoopThreadError.self) { try thread.perform {} }
        let fromPerform = try #require(performError.flatMap { LoopEndedError($0) })
        #expect(fromPerform.reason == .shutDown)
        #expect(fromPerform.loop.contains("ended-sd"))
        let sleepError = await #expect(throws: LoopEndedError.self) {
            try await thread.loop.sleep(for: .seconds(1))
        }
        #expect(sleepError?.reason == .shutDown)
        #expect(sleepError?.loop == thread.loop.description)
        let submitError = await #expect(throws: LoopEndedError.self) { try await thread.loop.submit { 1 } }
        #expect(submitError?.reason == .shutDown)
        #expect(submitError?.description.contains("has ended: its LoopThread was shut down") == true)
    }

    @Test("A loop whose thread exited tells reason threadExited; a port's send converts too")
    func afterThreadExit() async throws {
        let port = try LoopPort<Int> { _ in }
        let loop = Locked<Loop?>(nil)
        try PlatformThread.spawn(name: "ended-exit") {
            loop.withLock { $0 = Loop.current }
            try? Loop.current.add(port, forMode: .default)
        }.join()
        let exited = try #require(loop.withLock { $0 })
        let submitError = await #expect(throws: LoopEndedError.self) { try await exited.submit { 1 } }
        #expect(submitError?.reason == .threadExited)
        let sendError = #expect(throws: LoopPort<Int>.SendError.self) { try port.send(1) }
        let fromSend = try #require(sendError.flatMap { LoopEndedError($0) })
        #expect(fromSend.loop == exited.description)
    }

    @Test("A hosting refused because the loop ended converts to LoopEndedError")
    func hostingEnded() throws {
        let ended = try #require(LoopEndedError(LoopHostingError.ended))
        #expect(ended.loop == "a hosted loop")
        #expect(ended.reason == nil)
    }

    @Test("Errors that tell something else do not convert")
    func otherErrors() throws {
        #expect(LoopEndedError(CancellationError()) == nil)
        #expect(LoopEndedError(LoopPort<Int>.SendError.invalidated) == nil)
        for hosting in [LoopHostingError.alreadyHosted, .running, .driven, .noDescriptor] {
            #expect(LoopEndedError(hosting) == nil, "\(hosting)")
        }
        let ended = LoopEndedError(loop: "loop of thread 'x' (tid 1)")
        #expect(LoopEndedError(ended) == ended)
        #expect(ended.reason == nil)
        #expect(
            ended.description
                == "the loop of thread 'x' (tid 1) has ended (its thread exited or its LoopThread shut down)")
    }
}
