import LoopExecutor
import LoopRuntime
import LoopTesting
import Testing

/// An actor pinned to a test loop that submits delayed work to it.
private actor DelayedWork: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    init(_ executor: LoopExecutor) { loopExecutor = executor }

    /// Starts a `submit(after:)` in a task isolated to the actor (it calls an actor method), so its
    /// first job is queued on the test loop at once.
    func start(after delay: Duration) -> Task<Duration, any Error> {
        Task { try await submit(after: delay) }
    }

    /// How long after the call the body ran, on the loop's clock.
    func submit(after delay: Duration) async throws -> Duration {
        let loop = loopExecutor.loop
        let start = loop.now
        return try await loop.submit(after: delay) { start.duration(to: loop.now) }
    }
}

@Suite("Delayed submit on virtual time", .timeLimit(.minutes(3)))
struct SubmitAfterVirtualTimeTests {
    @Test("R34 submit(after:) on a test loop runs its body when the test advances to the delay, not before")
    func firesWhenTimeAdvances() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let work = DelayedWork(loop.executor)
        let submission = await work.start(after: .seconds(5))
        try await loop.runUntilIdle()
        #expect(loop.loop.timerCount(forMode: .default) == 1)
        try await loop.advance(by: .milliseconds(4_999))
        #expect(loop.loop.timerCount(forMode: .default) == 1)
        try await loop.advance(by: .milliseconds(1))
        #expect(try await submission.value == .seconds(5))
        #expect(loop.loop.timerCount(forMode: .default) == 0)
        await loop.shutdown()
    }
}
