import LoopExecutor
import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// Issue #32: the async API on a loop a host runs — sleeps, mode switches, pinned actors.
@Suite("Hosted loops and async code (issue #32)", .timeLimit(.minutes(3)))
struct HostedLoopExecutorTests {
    /// An actor pinned to a loop's thread.
    actor Pinned: LoopActor {
        nonisolated let loopExecutor: LoopExecutor
        init(_ loop: Loop) { loopExecutor = LoopExecutor(loop: loop) }
        func isOnItsLoop() -> Bool { loopExecutor.loop.isCurrentThread }
    }

    @Test("A hosted loop serves sleeps, async mode switches and a pinned actor")
    func asyncOnAHostedLoop() throws {
        let report = Trace()
        let thread = try PlatformThread.spawn(name: "async-host") {
            let loop = Loop.current
            let hosted = try! loop.beginHosting()
            let done = Trace()  // "done" once the task is through
            // The task runs on the hosted loop itself (in both modes it visits), not on the global
            // pool: under the thread sanitizer, with the suite's other blocking tests holding the
            // pool's threads, a pool task could wait past the deadline before it started.
            let executor = LoopExecutor(loop: loop, inModes: [.default, "tracking"])
            Task(executorPreference: executor) {
                try await loop.sleep(for: .milliseconds(10))
                report.append("slept")
                let switched = await loop.switchMode(to: "tracking")
                report.append("tracking:\(switched && loop.currentMode == "tracking")")
                _ = await loop.switchMode(to: .default)
                let onLoop = await Pinned(loop).isOnItsLoop()
                report.append("pinned:\(onLoop)")
                done.append("done")
                loop.wakeUp()
            }
            let deadline = ContinuousClock.now + .seconds(20)
            while done.all.isEmpty && ContinuousClock.now < deadline {
                var fds = [pollfd(fd: hosted.descriptor, events: Int16(POLLIN), revents: 0)]
                let limit = hosted.prepare().timeoutMilliseconds
                _ = poll(&fds, 1, limit < 0 ? 1000 : min(limit, 1000))
                hosted.dispatch()
            }
            hosted.end()
        }
        thread.join()
        #expect(report.all == ["slept", "tracking:true", "pinned:true"])
    }
}
