import LoopExecutor
import Testing

@testable import LoopRuntime

/// An actor pinned to a loop in the default mode only.
private actor DefaultModeActor: LoopActor {
    nonisolated let loopExecutor: LoopExecutor

    init(_ executor: LoopExecutor) { loopExecutor = executor }

    /// Runs a body in `mode` and returns the mode the loop ran while the body ran, and whether the
    /// body ran on the loop's thread.
    func switchAway(to mode: Loop.Mode) async throws -> (mode: Loop.Mode?, onLoop: Bool) {
        try await loopExecutor.loop.withMode(mode) {
            (loopExecutor.loop.currentMode, loopExecutor.loop.isCurrentThread)
        }
    }
}

/// Calls whose answer could never come trap with a message instead of leaving the task suspended
/// for ever (each message says why and what to do).
@Suite("Waits that could never end trap", .timeLimit(.minutes(3)))
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
            let actor = DefaultModeActor(thread.loop.executor(inModes: [.default]))
            _ = try await actor.switchAway(to: "elsewhere")
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
        let actor = DefaultModeActor(thread.loop.executor(inModes: [.common]))
        let common = try await actor.switchAway(to: "tracking")
        #expect(common.mode == "tracking" && common.onLoop)  // the body ran in the mode, on the loop
        let pinnedToBoth = DefaultModeActor(thread.loop.executor(inModes: [.default, "modal"]))
        let own = try await pinnedToBoth.switchAway(to: "modal")
        #expect(own.mode == "modal" && own.onLoop)
        #expect(await eventually { thread.loop.currentMode == .default })  // and the loop came back
    }

    @Test("Loop.sleep on a loop that runs, from its own thread (a pinned actor), still works")
    func sleepFromAPinnedActor() async throws {
        let thread = try LoopThread(name: "sleep-pinned")
        defer { thread.shutdown() }
        let actor = SleepingActor(thread.loop.executor)
        let (slept, onLoop) = try await actor.nap()
        #expect(slept >= .milliseconds(2), "the sleep ended early: \(slept)")
        #expect(onLoop, "the actor came back off its loop's thread")
        #expect(thread.loop.timerCount(forMode: .common) == 0)
    }
}

private actor SleepingActor: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    init(_ executor: LoopExecutor) { loopExecutor = executor }
    /// Sleeps 2 ms on its own loop; how long it slept and whether it woke on the loop's thread.
    func nap() async throws -> (Duration, Bool) {
        let start = ContinuousClock.now
        try await loopExecutor.loop.sleep(for: .milliseconds(2))
        return (ContinuousClock.now - start, loopExecutor.loop.isCurrentThread)
    }
}
