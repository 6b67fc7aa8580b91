import LoopExecutor
import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// The spellings renamed when the API settled on one dialect (a list of modes `inModes:`, one mode
/// `forMode:`, one `LoopBuffering`) still compile and do what the new ones do. The tests are
/// deprecated themselves, so that calling the old spellings is not a warning.
@Suite("Deprecated spellings forward to the new ones", .timeLimit(.minutes(3)))
struct DeprecatedSpellingsTests {
    @available(*, deprecated)
    @Test("contains(_:inMode:), nextFireDate(in:) and timerCount(in:) answer as the forMode: spellings")
    func runtimeQueries() throws {
        let loop = Loop(waiter: ManualWaiter())
        let timer = LoopTimer(after: .seconds(5)) { _ in }
        let source = LoopSource {}
        let observer = LoopObserver(activities: .entry) { _, _ in }
        let port = try LoopPort<Int> { _ in }
        defer { port.invalidate() }
        loop.add(timer, forMode: .default)
        loop.add(source, forMode: "other")
        loop.add(observer, forMode: .default)
        try loop.add(port, forMode: .default)
        for mode: Loop.Mode in [.default, "other"] {
            #expect(loop.contains(timer, inMode: mode) == loop.contains(timer, forMode: mode))
            #expect(loop.contains(source, inMode: mode) == loop.contains(source, forMode: mode))
            #expect(loop.contains(observer, inMode: mode) == loop.contains(observer, forMode: mode))
            #expect(loop.contains(port, inMode: mode) == loop.contains(port, forMode: mode))
            #expect(loop.timerCount(in: mode) == loop.timerCount(forMode: mode))
            #expect(loop.nextFireDate(in: mode) == loop.nextFireDate(forMode: mode))
        }
        #expect(loop.contains(timer, inMode: .default) && !loop.contains(timer, inMode: "other"))
        #expect(loop.contains(source, inMode: "other"))
        #expect(loop.timerCount(in: .default) == 1)
        timer.invalidate()
        source.invalidate()
        observer.invalidate()
    }

    @available(*, deprecated)
    @Test("executor(modes:) and LoopExecutor(loop:modes:) give executors in those modes")
    func executors() throws {
        let thread = try LoopThread(name: "old-executors")
        defer { thread.shutdown() }
        #expect(thread.loop.executor(modes: [.default]) === thread.loop.executor(inModes: [.default]))
        #expect(LoopExecutor(loop: thread.loop, modes: ["private"]).modes == ["private"])
    }

    @available(*, deprecated)
    @Test(
        "sleep(for:modes:), sleep(until:modes:), ticks(every:modes:), clock(modes:) and LoopClock(loop:modes:) use timers in those modes"
    )
    func timers() async throws {
        let thread = try LoopThread(name: "old-timers")
        defer { thread.shutdown() }
        let loop = thread.loop
        try await loop.sleep(for: .milliseconds(1), modes: [.default])
        try await loop.sleep(until: loop.now + .milliseconds(1), modes: [.default])
        for await _ in loop.ticks(every: .milliseconds(1), modes: [.default]) { break }
        #expect(loop.clock(modes: [.default]).modes == [.default])
        #expect(LoopClock(loop: loop, modes: ["private"]).modes == ["private"])
        // A sleep in a mode the thread does not run does not end until that mode runs.
        let woke = Atomic<Bool>(false)
        let sleeper = Task {
            try await loop.sleep(for: .zero, modes: ["private"])
            woke.store(true, ordering: .relaxed)
        }
        #expect(await eventually { loop.timerCount(forMode: "private") == 1 })
        let early = woke.load(ordering: .relaxed)
        #expect(!early)
        try thread.perform { Loop.current.run("private", for: .milliseconds(1)) }
        try await sleeper.value
    }

    @available(*, deprecated)
    @Test("activities(_:in:buffering:), stalls(longerThan:bufferingNewest:) and LoopActivityBuffering still stream")
    func streams() async throws {
        let thread = try LoopThread(name: "old-streams")
        defer { thread.shutdown() }
        let buffering: LoopActivityBuffering = .dropOldest(capacity: 8)
        let activities = thread.loop.activities(.beforeTimers, in: [.default], buffering: buffering)
        let stalls = thread.loop.stalls(longerThan: .milliseconds(5), bufferingNewest: 4)
        let watcher = Task { () -> (Loop.Activity?, Bool) in
            var events = activities.makeAsyncIterator()
            var reports = stalls.makeAsyncIterator()
            let event = await events.next()
            let stall = await reports.next()
            return (event?.activity, stall.map { $0.duration >= .milliseconds(5) } ?? false)
        }
        try await Task.sleep(for: .milliseconds(10))
        for _ in 0..<20 {
            try thread.perform(inModes: [.default]) { usleep(8_000) }  // a stall, and passes
        }
        let (activity, stalled) = await watcher.value
        #expect(activity == .beforeTimers)
        #expect(stalled)
    }
}
