import Dispatch
import LoopExecutor
import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Async mode switching", .serialized, .timeLimit(.minutes(3)))
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

    /// Issue #31, case 5: `withMode` looked the driver up again to switch back; a drive that had
    /// ended while the loop stayed open (a user's `LoopDriver` stopped in the body) made that
    /// lookup find none, and it trapped.
    @Test("withMode returns the body's result when the body stops the loop's own LoopDriver")
    func withModeAfterTheDriveEnded() async throws {
        let loop = Locked<Loop?>(nil)
        let driver = Locked<LoopDriver?>(nil)
        let threadMayExit = DispatchSemaphore(value: 0)  // the thread's exit would end the loop
        let driving = try PlatformThread.spawn(name: "own-driver") {
            let own = LoopDriver(loop: .current)
            loop.withLock { $0 = Loop.current }
            driver.withLock { $0 = own }
            own.run()
            threadMayExit.wait()
        }
        defer {
            threadMayExit.signal()
            driving.join()
        }
        #expect(await eventually { driver.withLock { $0?.isDriving } == true })
        let (theLoop, theDriver) = (loop.withLock { $0! }, driver.withLock { $0! })
        let result = try await theLoop.withMode("modal") { () async -> String in
            theDriver.stop()
            _ = await eventually { !theDriver.isDriving }
            return "done"
        }
        #expect(result == "done")
        #expect(theLoop.isOpen)  // the loop stays open: only its drive ended
    }

    /// Issue #31, case 6: a switch to B answered only when B was entered, so a switch to C before
    /// B's first pass left B's caller waiting until B came round again — for ever, if it never did.
    @Test("A switch superseded by another before its mode was entered returns false; withMode throws")
    func supersededSwitch() async throws {
        let thread = try LoopThread(name: "superseded")
        defer { thread.shutdown() }
        let loop = thread.loop
        // Keep the loop inside a block, so that no pass can enter a mode until both switches are in.
        let release = DispatchSemaphore(value: 0)
        let blocked = DispatchSemaphore(value: 0)
        try thread.perform {
            blocked.signal()
            release.wait()
        }
        await blocked.waitAsync()
        let toB = Task { await loop.switchMode(to: "B") }
        #expect(await eventually { thread.driver.mode == "B" })
        let scopedB = Task { try await loop.withMode("B2") {} }
        #expect(await eventually { thread.driver.mode == "B2" })
        let toC = Task { await loop.switchMode(to: "C") }
        #expect(await eventually { thread.driver.mode == "C" })
        release.signal()
        #expect(await toB.value == false)
        await #expect(throws: LoopModeSupersededError.self) { try await scopedB.value }
        #expect(await toC.value == true)
        #expect(loop.currentMode == "C")
    }
}
