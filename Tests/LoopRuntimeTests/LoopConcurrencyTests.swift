import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// SPEC R7, M2: everything but running is safe from any thread; hand-offs wake the loop once.
@Suite("Loop hand-off from other threads (SPEC R7, M2)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopConcurrencyTests {
    /// Iterations per thread; `LOOP_STRESS_ITERATIONS` raises it for long runs.
    static let iterations = Int(getenv("LOOP_STRESS_ITERATIONS").map { String(cString: $0) } ?? "") ?? 2_000

    @Test("M2 a burst of hand-offs to a sleeping loop costs one wake-up")
    func burstCoalesces() {
        let (loop, waiter) = makeManualLoop()
        let ran = Counter()
        loop.add(keepAliveSource(), forMode: .default)
        let source = LoopSource { ran.increment() }
        loop.add(source, forMode: .default)
        let waits = Counter()
        waiter.duringWait.withLock {
            $0 = { _ in
                guard waits.increment() == 1 else { return loop.stop() }
                for _ in 0..<100 { loop.perform(inModes: [.default]) { ran.increment() } }
                source.signal()
                loop.wakeUp()
            }
        }
        #expect(loop.run(.default) == .stopped)
        #expect(ran.count == 101)
        #expect(waiter.wakeCalls == 2)  // the burst, then the final stop: one each
    }

    @Test(
        "M2, R41 one wake rule: a change wakes a sleeping loop only if it can run in the mode it sleeps in; a moved timer re-arms without waking"
    )
    func oneWakeRule() {
        let (loop, waiter) = makeManualLoop()
        loop.add(keepAliveSource(), forMode: .default)
        let here = LoopSource {}
        let elsewhere = LoopSource {}
        loop.add(here, forMode: .default)
        loop.add(elsewhere, forMode: "other")
        // Each change is made while the loop sleeps in `.default`, one change per wait.
        let changes: [(String, wakes: Bool, @Sendable () -> Void)] = [
            ("block for another mode", false, { loop.perform(inModes: ["other"]) {} }),
            ("block for the mode", true, { loop.perform(inModes: [.default]) {} }),
            ("block for .common", true, { loop.perform {} }),
            ("source of another mode signalled", false, { elsewhere.signal() }),
            ("source of the mode signalled", true, { here.signal() }),
            (
                "timer added to another mode", false,
                {
                    loop.add(LoopTimer(fireAt: loop.now + .seconds(1)) { _ in }, forMode: "other")
                }
            ),
            (
                "timer added to the mode", false,
                {
                    loop.add(LoopTimer(fireAt: loop.now + .seconds(5)) { _ in }, forMode: .default)
                }
            ),
        ]
        let waits = Counter()
        let observed = Locked<[String]>([])
        let armed = Locked<[Int64]>([])
        waiter.duringWait.withLock {
            $0 = { waiter in
                let index = waits.increment() - 1
                guard index < changes.count else { return loop.stop() }
                let (name, _, makeChange) = changes[index]
                let before = waiter.wakeCalls
                makeChange()
                observed.withLock { $0.append("\(name): \(waiter.wakeCalls > before ? "woke" : "slept on")") }
                armed.withLock { $0.append(waiter.armedDeadline) }
                loop.wakeUp()  // end this wait, so the next change meets the next one
            }
        }
        #expect(loop.run(.default) == .stopped)
        let expected = changes.map { "\($0.0): \($0.wakes ? "woke" : "slept on")" }
        #expect(observed.withLock { $0 } == expected)
        // The timer of the mode re-armed the sleeping wait for its date; the other mode's did not.
        let deadlines = armed.withLock { $0 }
        #expect(deadlines[5] == LoopTime.distantFuture)
        #expect(deadlines[6] != LoopTime.distantFuture)
    }

    @Test("M2 no wake-up is written while the loop is awake")
    func noWakeWhileAwake() {
        let (loop, waiter) = makeManualLoop()
        loop.add(keepAliveSource(), forMode: .default)
        loop.perform(inModes: [.default]) {
            for _ in 0..<10 { loop.perform(inModes: [.default]) {} }
            loop.wakeUp()
        }
        loop.run(.default, for: .zero)
        #expect(waiter.wakeCalls == 0)
    }

    @Test("R7 blocks, signals, timers and stops from four threads: nothing lost, nothing twice")
    func stress() throws {
        let loop = try makeEpollLoop()
        let iterations = Self.iterations
        let blocks = Counter()
        let timersFired = Counter()
        let performs = Counter()
        let source = LoopSource { performs.increment() }
        loop.add(source, forMode: .default)
        let finished = Atomic<Int>(0)
        let threads = try (0..<4).map { index in
            try PlatformThread.spawn(name: "stress-\(index)") {
                for iteration in 0..<iterations {
                    loop.perform(inModes: [.default]) { blocks.increment() }
                    source.signal()
                    if iteration % 10 == 0 {
                        let timer = LoopTimer(after: .microseconds(Int64(iteration % 7))) { _ in timersFired.increment()
                        }
                        loop.add(timer, forMode: .default)
                        if iteration % 20 == 0 { timer.setFireDate(.now) }
                    }
                    if iteration % 50 == 0 {
                        let doomed = LoopTimer(after: .seconds(3600)) { _ in }
                        loop.add(doomed, forMode: .common)
                        loop.remove(doomed, forMode: .common)
                        doomed.invalidate()
                        loop.wakeUp()
                    }
                }
                finished.wrappingAdd(1, ordering: .releasing)
            }
        }
        let expectedTimers = 4 * ((iterations + 9) / 10)
        while finished.load(ordering: .acquiring) < 4 || blocks.count < 4 * iterations
            || timersFired.count < expectedTimers
        {
            loop.run(.default, for: .milliseconds(50))
        }
        threads.forEach { $0.join() }
        loop.run(.default, for: .zero)
        #expect(blocks.count == 4 * iterations)
        #expect(timersFired.count == expectedTimers)
        #expect(performs.count >= 1 && performs.count <= 4 * iterations)
        #expect(!source.isSignalled)
        #expect(loop.nextFireDate(forMode: .default) == nil)
    }

    @Test("R7 a loop on its own thread serves many senders; stop from outside ends it")
    func residentLoop() throws {
        let loopBox = Locked<Loop?>(nil)
        let ran = Counter()
        let server = try PlatformThread.spawn(name: "resident") {
            let loop = Loop.current
            loop.add(LoopSource {}, forMode: .default)  // keep-alive
            loopBox.withLock { $0 = loop }
            loop.run()
        }
        #expect(eventually { loopBox.withLock { $0 } != nil })
        let loop = try #require(loopBox.withLock { $0 })
        let senders = try (0..<3).map { _ in
            try PlatformThread.spawn {
                for _ in 0..<500 { loop.perform { ran.increment() } }
            }
        }
        senders.forEach { $0.join() }
        #expect(eventually { ran.count == 1500 })
        loop.stop()
        server.join()
        #expect(ran.count == 1500)
    }
}
