import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// SPEC R5 and the no-leak policy: thread-exit teardown and descriptors.
@Suite("Thread exit and descriptors (SPEC R5)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopThreadExitTests {
    /// Issue #31, case 12: a loop knew its thread by `pthread_t`, which glibc gives the next thread
    /// once the first has ended; a loop that outlived its thread then took a new thread for its
    /// own (`isCurrentThread`, and with it every "on the loop's thread" check).
    @Test("R7 a loop that outlived its thread is not a later thread's, even when that thread reuses its pthread_t")
    func outlivedLoopIsNotANewThreads() throws {
        let made = Locked<(Loop, pthread_t)?>(nil)
        try onNewThread(name: "first") {
            made.withLock { $0 = (Loop(waiter: ManualWaiter()), pthread_self()) }
        }
        let (loop, firstThread) = try #require(made.withLock { $0 })
        let seen = Locked<(current: Bool, samePthread: Bool)?>(nil)
        try onNewThread(name: "second") {
            seen.withLock { $0 = (loop.isCurrentThread, pthread_equal(pthread_self(), firstThread) != 0) }
        }
        let (current, samePthread) = try #require(seen.withLock { $0 })
        #expect(!current, "the loop took a new thread for its own (same pthread_t: \(samePthread))")
        #expect(!loop.isCurrentThread)
    }

    @Test("R5 thread exit detaches every item, calls cancel once per mode, drops blocks")
    func threadExitTeardown() throws {
        let trace = Trace()
        let source = LoopSource(cancel: { _, mode in trace.append("cancel:\(mode)") }) {}
        let timer = LoopTimer(fireAt: .now + .seconds(60)) { _ in }
        let observer = LoopObserver(activities: .entry) { _, _ in }
        let loopBox = Locked<Loop?>(nil)
        let blockRan = Counter()
        try onNewThread {
            let loop = Loop.current
            loopBox.withLock { $0 = loop }
            loop.addCommonMode("tracking")
            loop.add(source, forMode: .common)
            loop.add(timer, forMode: .default)
            loop.add(observer, forMode: .default)
            loop.perform(inModes: ["never-run"]) { blockRan.increment() }
        }
        let loop = try #require(loopBox.withLock { $0 })
        #expect(Set(trace.all) == ["cancel:default", "cancel:tracking"])
        #expect(source.isValid && timer.isValid && observer.isValid)  // detached, still valid
        #expect(!loop.contains(source, forMode: .default))
        #expect(!loop.contains(timer, forMode: .default))
        #expect(!loop.contains(observer, forMode: .default))
        #expect(blockRan.count == 0)
        #expect(!loop.perform { blockRan.increment() })  // no longer accepts work
        loop.add(timer, forMode: .default)  // a torn-down loop takes nothing
        #expect(!loop.contains(timer, forMode: .default))
    }

    @Test("R5 thread exit closes every descriptor the loop owns")
    func threadExitClosesDescriptors() async {
        // A child process, so that no other test opens descriptors meanwhile.
        await #expect(processExitsWith: .success) {
            let before = descriptorBaseline()
            for _ in 0..<20 {
                try onNewThread {
                    let loop = Loop.current
                    loop.add(LoopTimer(after: .milliseconds(1)) { _ in }, forMode: .default)
                    loop.run(.default, for: .seconds(5))
                }
            }
            requireNoNewDescriptors(since: before)
        }
    }

    @Test("Loops that are not any thread's current loop close their descriptors when released")
    func releasedLoopClosesDescriptors() async {
        await #expect(processExitsWith: .success) {
            let before = descriptorBaseline()
            for _ in 0..<20 {
                let loop = try makeEpollLoop()
                let timer = LoopTimer(after: .milliseconds(1)) { _ in }
                loop.add(timer, forMode: .default)
                loop.add(LoopSource {}, forMode: "other")
                loop.add(LoopObserver(activities: .entry) { _, _ in }, forMode: .default)
                loop.run(.default, for: .seconds(5))
            }
            requireNoNewDescriptors(since: before)
        }
    }

    @Test("The main loop is not torn down by other threads exiting")
    func mainLoopSurvives() throws {
        try onNewThread { _ = Loop.main }
        #expect(Loop.main.perform(inModes: [Loop.Mode("unused-\(UInt32.random(in: 0...UInt32.max))")]) {})
    }
}

/// The conversion between `ContinuousClock` and loop time.
@Suite("Loop time", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopTimeTests {
    @Test("ContinuousClock instants and CLOCK_BOOTTIME nanoseconds are interchangeable")
    func clocksAgree() {
        let before = LoopTime.now()
        let instant = ContinuousClock.now
        let after = LoopTime.now()
        let converted = LoopTime.nanoseconds(of: instant)
        #expect(before <= converted && converted <= after)
        #expect(
            LoopTime.instant(converted) == instant || LoopTime.nanoseconds(of: LoopTime.instant(converted)) == converted
        )
    }

    @Test("Durations convert to whole nanoseconds and saturate")
    func durations() {
        #expect(LoopTime.nanoseconds(of: .milliseconds(3)) == 3_000_000)
        #expect(LoopTime.nanoseconds(of: .nanoseconds(-7)) == -7)
        #expect(LoopTime.nanoseconds(of: .seconds(-2)) == -2_000_000_000)
        #expect(LoopTime.nanoseconds(of: .zero) == 0)
        #expect(LoopTime.nanoseconds(of: .nanoseconds(1) - .init(secondsComponent: 0, attosecondsComponent: 1)) == 0)
        // Either side of 2⁶⁴ attoseconds (~18.4 s), where the conversion changes method.
        #expect(LoopTime.nanoseconds(of: .seconds(18) + .milliseconds(446)) == 18_446_000_000)
        #expect(LoopTime.nanoseconds(of: .seconds(18) + .milliseconds(447)) == 18_447_000_000)
        #expect(LoopTime.nanoseconds(of: .seconds(3600) + .nanoseconds(5)) == 3_600_000_000_005)
        #expect(LoopTime.nanoseconds(of: .seconds(Int64.max)) == .max)
        #expect(LoopTime.nanoseconds(of: .seconds(Int64.min)) == .min)
        #expect(LoopTime.adding(10, to: .max - 5) == .max)
    }
}
