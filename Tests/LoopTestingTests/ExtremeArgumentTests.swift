import Dispatch
import LoopTesting
import Testing

@testable import LoopExecutor
@testable import LoopRuntime

/// Polls `condition` every millisecond until it holds or 100 s passed (generous: a sanitized run
/// starts dozens of exit-test processes at once, and this process may get no CPU for many seconds).
private func eventually(_ condition: () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + .seconds(100)
    while ContinuousClock.now < deadline {
        if condition() { return true }
        try? await Task.sleep(for: .milliseconds(1))
    }
    return condition()
}

/// Issue #31, case 10: every public API that takes a `Duration` or a count, with the values at the
/// ends of their ranges. Values a precondition refuses (a zero or negative interval, a negative
/// tolerance, a capacity below one) are proven by the exit tests of the types; these are the
/// values that must be accepted and mean "now" or "practically never" — none may trap.
@Suite("Extreme arguments: .zero, negative and .max durations, huge counts", .timeLimit(.minutes(2)))
struct ExtremeArgumentTests {
    /// `.seconds(Int64.max)` from now is past the end of `Int64` nanoseconds, and past the end of
    /// `Duration.components`' seconds once added to an instant: the loop clamps, as "never".
    static let durations: [Duration] = [.zero, .seconds(-1), .seconds(Int64.max), .seconds(Int64.min)]

    @Test("Timers: a fire date, a delay, an interval and a tolerance at the ends of their ranges", arguments: durations)
    func timers(extreme: Duration) throws {
        let thread = try LoopThread(name: "extreme-timers")
        defer { thread.shutdown() }
        let loop = thread.loop
        let timers = [
            LoopTimer(fireAt: .now + extreme) { _ in },
            LoopTimer(after: extreme) { _ in },
            LoopTimer(fireAt: .now, interval: extreme > .zero ? extreme : nil) { _ in },
            LoopTimer(fireAt: .now + extreme, interval: .seconds(1)) { _ in },
            LoopTimer(after: .seconds(3_600), tolerance: extreme > .zero ? extreme : .zero) { _ in },
            loop.perform(after: extreme) {},
            try thread.perform(after: extreme) {},
        ]
        for timer in timers where timer.isValid { loop.add(timer, forMode: .default) }
        try thread.perform(waitUntilDone: true) {}  // a pass with all of them
        // The ones whose first date is `extreme` away (the others fire now, or in an hour).
        for index in [0, 1, 5, 6] where extreme > .seconds(1) {
            let date = try #require(timers[index].fireDate)
            #expect(date > .now + .seconds(1_000_000), "a far date came out near (timer \(index))")
        }
        for timer in timers { timer.invalidate() }
    }

    @Test("Run calls: a timeout and a deadline at the ends of their ranges", arguments: durations)
    func runCalls(extreme: Duration) throws {
        let thread = try LoopThread(name: "extreme-runs")
        defer { thread.shutdown() }
        let results = Locked<[Loop.RunResult]>([])
        try thread.perform(waitUntilDone: true) {
            let loop = Loop.current
            // A timer in "extreme" stops the far runs at once; the others return by themselves.
            let stopper = LoopTimer(fireAt: .now) { _ in loop.stop() }
            loop.add(stopper, forMode: "extreme")
            loop.add(LoopSource {}, forMode: "extreme")  // keeps the mode alive
            results.withLock { $0.append(loop.run("extreme", for: extreme)) }
            let again = LoopTimer(fireAt: .now) { _ in loop.stop() }
            loop.add(again, forMode: "extreme")
            results.withLock { $0.append(loop.run("extreme", until: .now + extreme)) }
        }
        let all = results.withLock { $0 }
        #expect(all.count == 2)
        #expect(all.allSatisfy { $0 == .stopped || $0 == .timedOut })
    }

    @Test("Async timers: sleeps, a loop clock and ticks at the ends of their ranges", arguments: durations)
    func asyncTimers(extreme: Duration) async throws {
        let thread = try LoopThread(name: "extreme-sleeps")
        defer { thread.shutdown() }
        let loop = thread.loop
        let far = extreme > .seconds(1)
        // Due at once (zero, negative): each returns by itself, cancelled by nobody.
        let dueNow: [Task<Void, any Error>] = [
            Task { try await loop.sleep(for: far ? .zero : extreme) },
            Task { try await loop.sleep(until: .now + (far ? .zero : extreme)) },
            Task { try await loop.clock().sleep(for: far ? .zero : extreme) },
        ]
        for wait in dueNow { try await wait.value }
        guard far else { return }
        // Practically never: each waits until cancelled, and then throws. (So does a sleep with
        // that much tolerance: the loop wakes as late as every due window allows, SPEC M9.)
        let waits: [Task<Void, any Error>] = [
            Task { try await loop.sleep(for: .milliseconds(1), tolerance: extreme) },
            Task { try await loop.sleep(for: extreme) },
            Task { try await loop.sleep(until: .now + extreme) },
            Task { try await loop.clock().sleep(for: extreme) },
            Task { for await _ in loop.ticks(every: extreme) {} },
            Task { for await _ in loop.stalls(longerThan: extreme) {} },
        ]
        #expect(await eventually { loop.timerCount(forMode: .common) == 5 })  // the sleeps' and the ticks'
        for wait in waits { wait.cancel() }
        for wait in waits.prefix(4) {
            await #expect(throws: CancellationError.self) { try await wait.value }
        }
        for wait in waits.dropFirst(4) { _ = await wait.result }
        #expect(await eventually { loop.timerCount(forMode: .common) == 0 })
    }

    @Test("A test loop: a stall timeout, an advance and a sleep of .seconds(Int64.max)")
    func testLoop() async throws {
        let loop = try TestLoop(stallTimeout: .seconds(Int64.max))
        let sleeper = Task { try await loop.loop.sleep(for: .seconds(Int64.max)) }
        // The task starts on the pool: its timer is in only once it has reached the sleep (a
        // run-until-idle before that finds the loop idle, and the count below once read 0).
        #expect(await eventually { loop.loop.timerCount(forMode: .common) == 1 })
        try await loop.runUntilIdle()
        try await loop.advance(by: .seconds(1_000_000))
        // The clock saturates at the end of loop time, which is "never": the sleep still waits.
        try await loop.advance(by: .seconds(Int64.max))
        try await loop.advance(by: .seconds(Int64.max))
        #expect(loop.elapsed > .seconds(1_000_000))
        #expect(loop.loop.timerCount(forMode: .common) == 1)
        sleeper.cancel()
        await #expect(throws: CancellationError.self) { try await sleeper.value }
        await loop.shutdown()
    }

    /// Issue #31, case 14: a buffer was allocated whole when the stream was made — 48 MB for a
    /// million activities, a trap for `Int.max` — and a trace ring likewise.
    @Test(
        "Huge buffer capacities cost what they hold: activity streams and the trace ring",
        arguments: [1_000_000, Int.max])
    func hugeCapacities(capacity: Int) async throws {
        let thread = try LoopThread(name: "extreme-buffers")
        defer { thread.shutdown() }
        let loop = thread.loop
        for buffering in [LoopBuffering.dropOldest(capacity: capacity), .dropNewest(capacity: capacity)] {
            var ring = ActivityRing(buffering)
            let event = LoopActivityEvent(activity: .entry, mode: .default, time: .now, depth: 1, dropped: 0)
            for _ in 0..<100 { ring.append(event) }
            var taken = 0
            while ring.removeFirst() != nil { taken += 1 }
            #expect(taken == 100)  // nothing dropped below the capacity
            let received = Locked(false)
            let stream = Task {
                for await _ in loop.activities(buffering: buffering) { break }
                received.withLock { $0 = true }
            }
            // Passes until the stream has had an event (it observes from its first `next()`).
            #expect(
                await eventually {
                    _ = loop.perform {}
                    return received.withLock { $0 }
                })
            _ = await stream.result
        }
        loop.startTracing(capacity: capacity)
        // Tracing takes effect at the loop's next pass: the second block's is surely recorded.
        for _ in 0..<2 { try thread.perform(waitUntilDone: true) {} }
        loop.stopTracing()
        #expect(!loop.trace.events.isEmpty)
        #expect(loop.trace.dropped == 0)
        let stalls = Task {
            for await _ in loop.stalls(longerThan: .seconds(60), buffering: .dropOldest(capacity: capacity)) {}
        }
        stalls.cancel()
        _ = await stalls.result
    }
}
