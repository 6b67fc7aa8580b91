import Dispatch
import LoopExecutor
import Synchronization
import Testing

@_spi(LoopExecutorSupport) @testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Async mode switching", .serialized)
struct ModeSwitchingTests {
    @Test("switchMode returns once the loop runs the new mode; old-mode items freeze, common items run")
    func switchFreezesOldModeItems() async throws {
        let thread = try LoopThread(name: "switch")
        defer { thread.shutdown() }
        let loop = thread.loop
        loop.addCommonMode("scrolling")
        let defaultTicks = Atomic<Int>(0)
        let commonTicks = Atomic<Int>(0)
        let defaultTimer = LoopTimer(after: .milliseconds(2), interval: .milliseconds(2)) { _ in
            defaultTicks.wrappingAdd(1, ordering: .relaxed)
        }
        let commonTimer = LoopTimer(after: .milliseconds(2), interval: .milliseconds(2)) { _ in
            commonTicks.wrappingAdd(1, ordering: .relaxed)
        }
        loop.add(defaultTimer, forMode: .default)
        loop.add(commonTimer, forMode: .common)
        defer {
            defaultTimer.invalidate()
            commonTimer.invalidate()
        }
        await loop.switchMode(to: "scrolling")
        #expect(loop.currentMode == "scrolling")
        #expect(thread.driver.mode == "scrolling")
        let frozen = defaultTicks.load(ordering: .relaxed)
        let commonBefore = commonTicks.load(ordering: .relaxed)
        try await Task.sleep(for: .milliseconds(50))
        #expect(defaultTicks.load(ordering: .relaxed) == frozen)
        #expect(commonTicks.load(ordering: .relaxed) > commonBefore)
        await loop.switchMode(to: .default)
        #expect(loop.currentMode == .default)
        #expect(await eventually { defaultTicks.load(ordering: .relaxed) > frozen })
    }

    @Test("withMode restores the previous mode after the body returns, throws, or is cancelled")
    func withModeRestores() async throws {
        let thread = try LoopThread(name: "scoped")
        defer { thread.shutdown() }
        let loop = thread.loop
        let inside = try await loop.withMode("modal") { loop.currentMode }
        #expect(inside == "modal")
        #expect(loop.currentMode == .default)

        struct Failure: Error {}
        await #expect(throws: Failure.self) {
            try await loop.withMode("modal") { throw Failure() }
        }
        #expect(loop.currentMode == .default)

        let task = Task {
            try await loop.withMode("modal") { try await Task.sleep(for: .seconds(60)) }
        }
        #expect(await eventually { loop.currentMode == "modal" })
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(loop.currentMode == .default)
    }

    @Test("switchMode on a loop without a driver traps with a message")
    func undrivenTraps() async {
        await #expect(processExitsWith: .failure) {
            let thread = try LoopThread(name: "undriven")
            let other = Loop.main  // the main loop is not driven here
            _ = thread
            await other.switchMode(to: "x")
        }
    }
}
