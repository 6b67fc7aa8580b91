import LoopExecutor
import LoopRuntime
import LoopTesting
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A thread-safe list of what happened, in order.
final class Log: Sendable {
    private let entries = Locked<[String]>([])  // a lock the thread sanitizer sees
    func append(_ entry: String) { entries.withLock { $0.append(entry) } }
    var all: [String] { entries.withLock { $0 } }
    var text: String { all.joined(separator: " ") }
}

/// Whole milliseconds of virtual time since `loop` started.
func ms(_ loop: TestLoop) -> Int64 { Napper.milliseconds(loop.elapsed) }

@Suite("TestLoop: virtual time on a real loop", .timeLimit(.minutes(3)))
struct TestLoopTests {
    @Test("A one-shot timer fires at its date, not before, and its callout sees that date as now")
    func oneShotTimer() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let log = Log()
        loop.loop.add(LoopTimer(after: .milliseconds(100)) { _ in log.append("fired@\(ms(loop))") }, forMode: .default)
        try await loop.advance(by: .milliseconds(99))
        #expect(log.all.isEmpty)
        try await loop.advance(by: .milliseconds(1))
        #expect(log.text == "fired@100")
        try await loop.advance(by: .seconds(10))
        #expect(log.text == "fired@100")  // one-shot
    }

    @Test("A repeating timer fires at every point of its grid as time advances past them (SPEC R37)")
    func repeatingTimer() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let log = Log()
        let timer = LoopTimer(after: .milliseconds(100), interval: .milliseconds(100)) { _ in log.append("\(ms(loop))")
        }
        loop.loop.add(timer, forMode: .common)
        try await loop.advance(by: .milliseconds(450))
        #expect(log.text == "100 200 300 400")
        try await loop.advance(to: loop.now + .milliseconds(150))
        #expect(log.text == "100 200 300 400 500 600")
        timer.invalidate()
    }

    @Test("Missed fire points are skipped while the loop runs another mode, phase kept (SPEC R34, R37)")
    func missedPointsInAnotherMode() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let log = Log()
        let timer = LoopTimer(after: .milliseconds(100), interval: .milliseconds(100)) { _ in log.append("\(ms(loop))")
        }
        loop.loop.add(timer, forMode: .default)
        try await loop.advance(by: .milliseconds(150))
        #expect(log.text == "100")
        #expect(await loop.loop.switchMode(to: "tracking"))
        try await loop.advance(by: .milliseconds(300))  // to 450: the points at 200, 300, 400 pass
        #expect(log.text == "100")
        #expect(await loop.loop.switchMode(to: .default))
        try await loop.runUntilIdle()
        #expect(log.text == "100 450")  // once for all of them, at the first opportunity
        try await loop.advance(by: .milliseconds(100))  // to 550: the grid point 500 came
        #expect(log.text == "100 450 500")
        timer.invalidate()
    }

    @Test("Tolerance lets timers with overlapping windows fire in one wake-up (SPEC R43)")
    func tolerance() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let log = Log()
        let observer = LoopObserver(activities: .afterWaiting) { _, _ in log.append("woke@\(ms(loop))") }
        loop.loop.add(observer, forMode: .default)
        loop.loop.add(
            LoopTimer(after: .milliseconds(100), tolerance: .milliseconds(50)) { _ in log.append("a@\(ms(loop))") },
            forMode: .default)
        loop.loop.add(LoopTimer(after: .milliseconds(120)) { _ in log.append("b@\(ms(loop))") }, forMode: .default)
        try await loop.advance(by: .milliseconds(200))
        // One wake-up at 120, inside both windows; never early.
        #expect(log.text == "woke@120 a@120 b@120")
        observer.invalidate()
    }

    @Test("Loop.sleep resumes when the test advances past its deadline, on the loop for a pinned actor")
    func sleepUnderAdvance() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let napper = Napper(executor: loop.executor)
        // Started from the actor, the task's first job is queued on the loop at once: when runUntilIdle()
        // returns, it is asleep. (A Task made here would start on the global pool, at its leisure.)
        let nap = await napper.startNap(.seconds(1))
        try await loop.runUntilIdle()
        #expect(loop.loop.timerCount(forMode: .default) == 1)
        try await loop.advance(by: .milliseconds(999))
        #expect(await napper.woke == nil)
        try await loop.advance(by: .milliseconds(1))
        // advance returned with the loop idle: the resumed task already ran on the loop.
        #expect(await napper.woke == 1_000)
        #expect(try await nap.value == true)
        #expect(loop.loop.timerCount(forMode: .default) == 0)
    }

    @Test("Tick sequences deliver one tick per grid point as time advances, with the dates")
    func ticksUnderAdvance() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let ticker = Napper(executor: loop.executor)
        let ticks = await ticker.startCollectingTicks(3, every: .milliseconds(100))
        try await loop.runUntilIdle()
        for _ in 0..<3 { try await loop.advance(by: .milliseconds(100)) }
        #expect(await ticks.value == [100, 200, 300])
    }

    /// How a pinned consumer iterates a tick sequence.
    enum TickIteration: String, CaseIterable, Sendable {
        case forAwait, explicitNext, prefixAdapter
    }

    @Test(
        "One advance across five intervals gives a pinned consumer five ticks, however it iterates (issue #36; ×100, 8 test loops at once)"
    )
    func oneAdvanceDeliversEveryTick() async throws {
        for round in 0..<100 {
            let outcomes = try await withThrowingTaskGroup(of: (TickIteration, [String]).self) { group in
                for index in 0..<8 {
                    let iteration = TickIteration.allCases[(round + index) % TickIteration.allCases.count]
                    group.addTask {
                        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
                        let consumer = TickConsumer(executor: loop.executor)
                        let consuming = await consumer.start(iteration, every: .seconds(1))
                        try await loop.runUntilIdle()
                        try await loop.advance(by: .seconds(5))
                        let seen = await consumer.seen
                        consuming.cancel()
                        await consuming.value
                        await loop.shutdown()
                        return (iteration, seen)
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            for (iteration, seen) in outcomes {
                #expect(seen == ["1000+0", "2000+0", "3000+0", "4000+0", "5000+0"], "\(iteration), round \(round)")
            }
        }
    }

    @Test("A pinned actor's jobs run on the test loop's thread, in the modes of its executor")
    func pinnedActor() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let napper = Napper(executor: loop.executor)
        #expect(await napper.onLoopThread())
        #expect(await loop.loop.switchMode(to: "tracking"))  // not a common mode: the actor waits
        let call = Task { await napper.onLoopThread() }  // from the global pool: wait until it is queued
        let queued = ContinuousClock.now + .seconds(30)
        while loop.executor.pendingJobCount == 0 && ContinuousClock.now < queued { await Task.yield() }
        try await loop.advance(by: .seconds(1))
        #expect(loop.executor.pendingJobCount == 1)
        #expect(await loop.loop.switchMode(to: .default))
        #expect(await call.value)
    }

    @Test("One pass notifies observers in the pass order (SPEC R19): after waiting, timers, sources, before waiting")
    func onePassActivities() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let log = Log()
        let observer = LoopObserver(activities: .allActivities) { _, activity in log.append("\(activity)") }
        loop.loop.add(observer, forMode: .default)
        try await loop.runUntilIdle()
        let before = log.all.count
        try await loop.runOnePass()
        #expect(log.all.dropFirst(before).joined(separator: " ") == "AW BT BS BW")
        observer.invalidate()
    }

    @Test("An advance that reaches a timer wakes the loop as a real one (SPEC R19): AW, the timer, a pass")
    func advanceActivities() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let log = Log()
        let observer = LoopObserver(activities: [.afterWaiting, .beforeTimers, .beforeSources, .beforeWaiting]) {
            _, activity in log.append("\(activity)")
        }
        loop.loop.add(observer, forMode: .default)
        loop.loop.add(LoopTimer(after: .milliseconds(10)) { _ in log.append("timer@\(ms(loop))") }, forMode: .default)
        try await loop.runUntilIdle()
        let before = log.all.count
        try await loop.advance(by: .milliseconds(10))
        #expect(log.all.dropFirst(before).joined(separator: " ") == "AW timer@10 BT BS BW")
        observer.invalidate()
    }

    @Test("The activity stream reports passes on the loop's virtual clock")
    func activityStreamTimes() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let watcher = Napper(executor: loop.executor)
        let events = await watcher.startWatching(.afterWaiting, count: 1)
        try await loop.runUntilIdle()
        loop.loop.add(LoopTimer(after: .milliseconds(100)) { _ in }, forMode: .default)
        try await loop.advance(by: .milliseconds(100))
        #expect(await events.value == [100])  // the wake-up for the timer, at its virtual date
    }

    @Test("Blocks performed in a mode run when the loop is in it, at the current virtual time")
    func blocksInModes() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let log = Log()
        #expect(await loop.loop.switchMode(to: "tracking"))
        #expect(loop.loop.perform(inModes: [.default]) { log.append("default@\(ms(loop))") })
        #expect(loop.loop.perform(inModes: ["tracking"]) { log.append("tracking@\(ms(loop))") })
        try await loop.advance(by: .milliseconds(5))
        #expect(log.text == "tracking@0")
        #expect(await loop.loop.switchMode(to: .default))
        try await loop.runUntilIdle()
        #expect(log.text == "tracking@0 default@5")
    }

    @Test("A descriptor source made ready by the test is performed in its mode")
    func descriptorReadiness() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let log = Log()
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer {
            close(fds[0])
            close(fds[1])
        }
        let source = LoopDescriptorSource(descriptor: fds[0], events: .readable) {
            _, events in log.append("ready \(events.contains(.readable))@\(ms(loop))")
        }
        try loop.loop.add(source, forMode: .default)
        try await loop.advance(by: .milliseconds(5))
        #expect(log.all.isEmpty)
        loop.makeReady(source)
        try await loop.runUntilIdle()
        #expect(log.text == "ready true@5")
        try await loop.advance(by: .milliseconds(5))
        #expect(log.text == "ready true@5")  // reported once
        source.invalidate()
    }

    @Test("A task that waits for a timer the test never advances to is reported, not left hanging")
    func stallIsReported() async throws {
        let loop = try TestLoop(name: "stalls", stallTimeout: .milliseconds(300))
        await #expect(throws: LoopEndedError.self) {
            try await loop.loop.sleep(for: .seconds(1))  // nobody advances: a stall
        }
        let stall = try #require(loop.stall)
        #expect(stall.timerDeadline == .seconds(1))
        #expect(stall.waitingJobModes == nil)
        #expect(stall.now == .zero)
        #expect(stall.description.contains("advance(by:)"))
        await #expect(throws: TestLoopError.stalled(stall)) { try await loop.advance(by: .seconds(1)) }
    }

    @Test("Awaiting an actor whose modes exclude the loop's current mode is reported, not left hanging")
    func modeStallIsReported() async throws {
        let loop = try TestLoop(name: "mode stall", stallTimeout: .milliseconds(300))
        let napper = Napper(executor: loop.loop.executor(inModes: [.default]))
        #expect(await loop.loop.switchMode(to: "tracking"))
        // The call waits for the default mode, which never comes: reported, and the shutdown's
        // drain runs the job, so the await returns.
        #expect(await napper.onLoopThread())
        let stall = try #require(loop.stall)
        #expect(stall.waitingJobModes == [.default])
        #expect(stall.sleepingMode == "tracking")
        #expect(stall.timerDeadline == nil)
        #expect(stall.description.contains("switchMode(to:)"))
    }

    @Test("After shutdown every call answers: advance throws, a sleep throws LoopEndedError")
    func afterShutdown() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        await loop.shutdown()
        let advanceError = await #expect(throws: TestLoopError.self) { try await loop.advance(by: .seconds(1)) }
        #expect(advanceError.flatMap { LoopEndedError($0) }?.reason == .shutDown)
        await #expect(throws: LoopEndedError.self) { try await loop.loop.sleep(for: .seconds(1)) }
    }

    @Test("LoopTimer(after:) counts from when it is added, on the loop's virtual clock")
    func relativeTimerUsesTheLoopsClock() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        try await loop.advance(by: .seconds(5))
        let log = Log()
        let timer = LoopTimer(after: .milliseconds(10)) { _ in log.append("fired@\(ms(loop))") }
        loop.loop.add(timer, forMode: .default)
        #expect(timer.fireDate == loop.now + .milliseconds(10))
        try await loop.advance(by: .milliseconds(10))
        #expect(log.text == "fired@5010")
    }
}

/// An actor pinned to a test loop.
actor Napper: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    private let start: ContinuousClock.Instant
    private(set) var woke: Int64?

    init(executor: LoopExecutor) {
        loopExecutor = executor
        start = executor.loop.now
    }

    func nap(_ duration: Duration) async throws -> Bool {
        try await loopExecutor.loop.sleep(for: duration)
        woke = Self.milliseconds(start.duration(to: loopExecutor.loop.now))
        return loopExecutor.loop.isCurrentThread
    }

    func collectTicks(_ count: Int, every interval: Duration) async -> [Int64] {
        var dates: [Int64] = []
        for await tick in loopExecutor.loop.ticks(every: interval) {
            dates.append(Self.milliseconds(start.duration(to: tick.date)))
            if dates.count == count { break }
        }
        return dates
    }

    func onLoopThread() -> Bool { loopExecutor.loop.isCurrentThread }

    /// Collects the times (ms since the actor was made) of the first `count` events of `activity`.
    func startWatching(_ activity: Loop.Activity, count: Int) -> Task<[Int64], Never> {
        Task {
            var times: [Int64] = []
            for await event in loopExecutor.loop.activities(activity) {
                times.append(Self.milliseconds(start.duration(to: event.time)))
                if times.count == count { break }
            }
            return times
        }
    }

    func startNap(_ duration: Duration) -> Task<Bool, any Error> {
        Task { try await nap(duration) }
    }

    func startCollectingTicks(_ count: Int, every interval: Duration) -> Task<[Int64], Never> {
        Task { await collectTicks(count, every: interval) }
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1_000 + attoseconds / 1_000_000_000_000_000
    }
}

/// An actor pinned to a test loop that records the ticks it gets (`ms+missed`), iterating the
/// sequence in one of the ways users do.
actor TickConsumer: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    private let start: ContinuousClock.Instant
    private(set) var seen: [String] = []

    init(executor: LoopExecutor) {
        loopExecutor = executor
        start = executor.loop.now
    }

    func start(_ iteration: TestLoopTests.TickIteration, every interval: Duration) -> Task<Void, Never> {
        Task { await consume(iteration, every: interval) }
    }

    private func consume(_ iteration: TestLoopTests.TickIteration, every interval: Duration) async {
        let ticks = loopExecutor.loop.ticks(every: interval)
        switch iteration {
        case .forAwait:
            for await tick in ticks { record(tick) }
        case .explicitNext:
            // A plain call of `next()` (no isolation argument): it must not leave the loop.
            var iterator = ticks.makeAsyncIterator()
            while let tick = await iterator.next() { record(tick) }
        case .prefixAdapter:
            for await tick in ticks.prefix(5) { record(tick) }
        }
    }

    private func record(_ tick: LoopTick) {
        seen.append("\(Napper.milliseconds(start.duration(to: tick.date)))+\(tick.missed)")
    }
}

/// The stall timeout of the suites' test loops: a test loop reports a stall after this much real
/// time idle while a task waits for a timer. A sanitized CI run starts dozens of exit-test
/// processes at once on two cores, and a test's task may then get no CPU for half a minute — not
/// a stall of the test; the default of 30 s would report one.
let busyMachineStallTimeout: Duration = .seconds(120)
