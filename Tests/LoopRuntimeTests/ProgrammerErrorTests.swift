import Testing

@testable import LoopRuntime

/// SPEC M5, M6, R7, R9: programmer errors trap with a message (each proven in a child process).
@Suite("Programmer errors (SPEC M5, M6, R7, R9)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct ProgrammerErrorTests {
    @Test("R9 M5 running .common traps")
    func runCommon() async {
        await #expect(processExitsWith: .failure) {
            let loop = Loop(waiter: ManualWaiter())
            loop.add(LoopSource {}, forMode: .default)
            loop.run(.common, for: .zero)
        }
    }

    @Test("R7 running a loop off its thread traps, naming both threads")
    func runOffThread() async {
        await #expect(processExitsWith: .failure) {
            let loop = Loop(waiter: ManualWaiter())
            loop.add(LoopSource {}, forMode: .default)
            let thread = try PlatformThread.spawn(name: "intruder") {
                loop.run(.default, for: .zero)
            }
            thread.join()
        }
    }

    @Test("M5 a repeating interval of zero or less traps", arguments: [Duration.zero, .seconds(-1)])
    func badInterval(interval: Duration) async {
        await #expect(processExitsWith: .failure) { [interval] in
            _ = LoopTimer(fireAt: .now, interval: interval) { _ in }
        }
    }

    @Test("M5 a negative tolerance traps, at creation and when set")
    func negativeTolerance() async {
        await #expect(processExitsWith: .failure) {
            _ = LoopTimer(fireAt: .now, tolerance: .milliseconds(-1)) { _ in }
        }
        await #expect(processExitsWith: .failure) {
            let timer = LoopTimer(fireAt: .now) { _ in }
            timer.tolerance = .nanoseconds(-1)
        }
    }

    @Test("M6 adding a timer of one loop to another traps")
    func timerOnTwoLoops() async {
        await #expect(processExitsWith: .failure) {
            let timer = LoopTimer(fireAt: .now) { _ in }
            Loop(waiter: ManualWaiter()).add(timer, forMode: .default)
            Loop(waiter: ManualWaiter()).add(timer, forMode: .default)
        }
    }

    @Test("M6 adding an observer of one loop to another traps")
    func observerOnTwoLoops() async {
        await #expect(processExitsWith: .failure) {
            let observer = LoopObserver(activities: .entry) { _, _ in }
            let first = Loop(waiter: ManualWaiter())
            first.add(observer, forMode: .default)
            Loop(waiter: ManualWaiter()).add(observer, forMode: "other")
        }
    }

    @Test("M6 a timer stays bound to its first loop after leaving it")
    func timerStaysBound() async {
        await #expect(processExitsWith: .failure) {
            let timer = LoopTimer(fireAt: .now) { _ in }
            let first = Loop(waiter: ManualWaiter())
            first.add(timer, forMode: .default)
            first.remove(timer, forMode: .default)
            Loop(waiter: ManualWaiter()).add(timer, forMode: .default)
        }
    }

    @Test("R57 an empty mode list for perform traps, naming the call and what to pass")
    func emptyModeList() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            Loop(waiter: ManualWaiter()).perform(inModes: []) {}
        }
        let message = String(decoding: exit.standardErrorContent, as: UTF8.self)
        #expect(message.contains("Loop.perform(inModes:label:_:) was given an empty mode list"))
        #expect(message.contains("Pass [.common] (the default)"))
    }

    @Test("R57 an empty mode list for a delayed perform traps, suggesting its own default")
    func emptyModeListDelayed() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            Loop(waiter: ManualWaiter()).perform(after: .seconds(1), inModes: []) {}
        }
        let message = String(decoding: exit.standardErrorContent, as: UTF8.self)
        #expect(message.contains("Loop.perform(after:inModes:label:_:) was given an empty mode list"))
        #expect(message.contains("Pass [.default] (the default)"))
    }

    @Test("R62 making .common a common mode traps")
    func commonIntoCommonSet() async {
        await #expect(processExitsWith: .failure) {
            Loop(waiter: ManualWaiter()).addCommonMode(.common)
        }
    }

    @Test("Programmer errors explain themselves (the message names the rule and the loop)")
    func messagesTeach() async throws {
        let result = try await #require(
            processExitsWith: .failure, observing: [\.standardErrorContent]
        ) {
            let loop = Loop(waiter: ManualWaiter())
            loop.add(LoopSource {}, forMode: .default)
            loop.run(.common, for: .zero)
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("cannot be run (SPEC R9, M5)"))
        #expect(message.contains("loop of thread"))
    }
}
