import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// LoopDriver: drive a loop, switch its mode from outside, stop it — and leave no trace after.
@Suite("LoopDriver", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopDriverTests {
    @Test("A switch re-enters the loop in the new mode; entered callbacks run from its first pass")
    func switchReenters() {
        let (loop, waiter) = makeManualLoop()
        let driver = LoopDriver(loop: loop)
        let trace = Trace()
        loop.addCommonMode("tracking")
        loop.add(tracing(trace, .entry), forMode: .common)
        let waits = Counter()
        waiter.duringWait.withLock {
            $0 = { _ in
                switch waits.increment() {
                case 1: driver.switchMode(to: "tracking") { trace.append("entered:\(loop.currentMode!)") }
                case 2: driver.stop()
                default: break
                }
            }
        }
        driver.run()
        #expect(trace.text == "E E entered:tracking")
        #expect(driver.mode == "tracking")
        #expect(!driver.isDriving)
    }

    @Test("Stopping the driver does not stop a nested run started inside its run")
    func stopLeavesNestedRunsAlone() {
        let (loop, waiter) = makeManualLoop()
        let driver = LoopDriver(loop: loop)
        let trace = Trace()
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow + .milliseconds(1)) { _ in
                driver.stop()  // requested while the nested run below is the innermost
                trace.append("nested:\(loop.run("modal", for: .milliseconds(5)))")
            }, forMode: .default)
        loop.add(keepAliveSource(), forMode: "modal")
        driver.run()
        #expect(trace.text == "nested:timedOut")
        #expect(!driver.isDriving)
    }

    @Test("After the drive, the driver's items are gone: runs of visited modes behave as before")
    func leavesNoTrace() {
        let (loop, waiter) = makeManualLoop()
        let driver = LoopDriver(loop: loop)
        let waits = Counter()
        waiter.duringWait.withLock {
            $0 = { _ in
                switch waits.increment() {
                case 1: driver.switchMode(to: "x")
                case 2: driver.switchMode(to: .default)
                case 3: driver.stop()
                default: break
                }
            }
        }
        driver.run()
        waiter.duringWait.withLock { $0 = nil }
        // No keep-alive source and no guardian left: both modes are empty again (SPEC R10).
        #expect(loop.run("x", for: .seconds(1)) == .finished)
        #expect(loop.run(.default, for: .seconds(1)) == .finished)
        loop.add(keepAliveSource(), forMode: "x")
        #expect(loop.run("x", for: .milliseconds(1)) == .timedOut)  // not stopped at entry
    }
}

@Suite("Releasing user objects outside the loop's lock", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopLockReentryTests {
    /// An object whose deinit uses the loop, as RAII-style user code does.
    final class UsesLoopInDeinit: @unchecked Sendable {
        // Immutable after init.
        let loop: Loop
        let flag: Counter
        init(_ loop: Loop, _ flag: Counter) {
            self.loop = loop
            self.flag = flag
        }
        deinit {
            loop.perform(inModes: ["elsewhere"]) {}
            flag.increment()
        }
    }

    @Test("A timer's last release may run a deinit that calls into the loop: no deadlock")
    func timerDeinitCallsIntoLoop() {
        let (loop, waiter) = makeManualLoop()
        let deinits = Counter()
        do {
            let captured = UsesLoopInDeinit(loop, deinits)
            let timer = LoopTimer(fireAt: waiter.virtualNow + .seconds(60)) { _ in _ = captured }
            loop.add(timer, forMode: .default)
            timer.invalidate()  // its heap entry (the last reference) is dropped later, by the loop
        }
        loop.add(keepAliveSource(), forMode: .default)
        loop.add(LoopTimer(fireAt: waiter.virtualNow + .milliseconds(1)) { _ in }, forMode: .default)
        // The passes prune the stale entry, and the next one releases it, outside the lock.
        loop.run(.default, for: .milliseconds(10))
        #expect(deinits.count == 1)
    }

    @Test("A delayed perform's timer and block are freed once it ran")
    func delayedPerformIsFreed() throws {
        let thread = try LoopThread(name: "freed")
        defer { thread.shutdown() }
        let deinits = Counter()
        weak var weakTimer: LoopTimer?
        do {
            let captured = UsesLoopInDeinit(thread.loop, deinits)
            let timer = try thread.perform(after: .milliseconds(1)) { _ = captured }
            weakTimer = timer
        }
        #expect(eventually { deinits.count == 1 })
        #expect(weakTimer == nil)
    }
}
