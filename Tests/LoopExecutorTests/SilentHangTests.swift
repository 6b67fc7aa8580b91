import LoopExecutor
import Testing

@_spi(LoopExecutorSupport) @testable import LoopRuntime

/// An actor pinned to a loop in the default mode only.
private actor DefaultModeActor: LoopActor {
    nonisolated let loopExecutor: LoopExecutor

    init(_ executor: LoopExecutor) { loopExecutor = executor }

    func switchAway(to mode: Loop.Mode) async throws {
        try await loopExecutor.loop.withMode(mode) {}
    }
}

/// Calls whose answer could never come trap with a message instead of leaving the task suspended
/// for ever (each message says why and what to do).
@Suite("Waits that could never end trap")
struct SilentHangTests {
    @Test("Loop.sleep on a loop nobody runs (Loop.current on the cooperative pool) traps")
    func sleepOnAnIdleCurrentLoop() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            try await Loop.current.sleep(for: .milliseconds(1))
        }
        #expect(String(decoding: exit.standardErrorContent, as: UTF8.self).contains("nothing runs that loop"))
    }

    @Test("Ticks of a loop nobody runs (Loop.current on the cooperative pool) trap")
    func ticksOnAnIdleCurrentLoop() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            for try await _ in Loop.current.ticks(every: .milliseconds(1)) { break }
        }
        #expect(String(decoding: exit.standardErrorContent, as: UTF8.self).contains("LoopTicks: the task runs"))
    }

    @Test("Loop.submit on a loop nobody runs (Loop.current on the cooperative pool) traps")
    func submitOnAnIdleCurrentLoop() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            _ = try await Loop.current.submit { 1 }
        }
        #expect(String(decoding: exit.standardErrorContent, as: UTF8.self).contains("Loop.submit: the task runs"))
    }

    @Test("withMode from an actor that cannot run in that mode traps")
    func withModeFromAPausedActor() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let thread = try LoopThread(name: "with-mode")
            let actor = DefaultModeActor(thread.loop.executor(modes: [.default]))
            try await actor.switchAway(to: "elsewhere")
        }
        let message = String(decoding: exit.standardErrorContent, as: UTF8.self)
        #expect(message.contains("cannot run while the loop is in \"elsewhere\""))
        #expect(message.contains("whose modes are [\"default\"]"))
    }

    @Test("withMode from an actor that can run in that mode (its own mode, or a common one) works")
    func withModeFromAnActorThatRuns() async throws {
        let thread = try LoopThread(name: "with-mode-ok")
        defer { thread.shutdown() }
        thread.loop.addCommonMode("tracking")
        let actor = DefaultModeActor(thread.loop.executor(modes: [.common]))
        try await actor.switchAway(to: "tracking")
        let pinnedToBoth = DefaultModeActor(thread.loop.executor(modes: [.default, "modal"]))
        try await pinnedToBoth.switchAway(to: "modal")
    }

    @Test("Loop.sleep on a loop that runs, from its own thread (a pinned actor), still works")
    func sleepFromAPinnedActor() async throws {
        let thread = try LoopThread(name: "sleep-pinned")
        defer { thread.shutdown() }
        let actor = SleepingActor(thread.loop.executor)
        try await actor.nap()
    }
}

private actor SleepingActor: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    init(_ executor: LoopExecutor) { loopExecutor = executor }
    func nap() async throws {
        try await loopExecutor.loop.sleep(for: .milliseconds(2))
    }
}
