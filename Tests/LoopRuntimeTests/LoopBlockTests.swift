import Testing

@testable import LoopRuntime

/// SPEC H: blocks, and M10.
@Suite("Loop blocks (SPEC R57–R60, M10)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopBlockTests {
    @Test("R57 R58 blocks run in FIFO order in matching modes; others stay queued in order")
    func fifoAndMatching() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let tracking: Loop.Mode = "tracking"
        loop.perform(inModes: [.default]) { trace.append("d1") }
        loop.perform(inModes: [tracking]) { trace.append("t1") }
        loop.perform(inModes: [.default, tracking]) { trace.append("both") }
        loop.perform(inModes: [tracking]) { trace.append("t2") }
        loop.perform(inModes: [.default]) { trace.append("d2") }
        loop.perform { trace.append("common") }  // default: [.common]
        loop.run(.default, for: .zero)
        #expect(trace.text == "d1 both d2 common")
        trace.clear()
        loop.run(tracking, for: .zero)
        #expect(trace.text == "t1 t2")
    }

    @Test("R57 .common blocks run in whichever common mode is running, not in others")
    func commonTarget() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        loop.add(keepAliveSource(), forMode: "private")
        loop.perform(inModes: [.common]) { trace.append("common:\(loop.currentMode!)") }
        loop.run("private", for: .zero)
        #expect(trace.all.isEmpty)
        loop.addCommonMode("modal")
        loop.run("modal", for: .zero)
        #expect(trace.text == "common:modal")
    }

    @Test("R57 R58 a queue of only .common blocks is taken whole in common modes and left whole elsewhere")
    func commonOnlyQueue() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let tracking: Loop.Mode = "tracking"
        loop.add(keepAliveSource(), forMode: tracking)
        loop.perform(inModes: [tracking]) { trace.append("t1") }
        loop.perform { trace.append("c1") }
        loop.perform { trace.append("c2") }
        loop.run(.default, for: .zero)  // a mode-naming block is queued: the walking path
        #expect(trace.text == "c1 c2")
        trace.clear()
        loop.run(tracking, for: .zero)  // takes the last mode-naming block
        #expect(trace.text == "t1")
        trace.clear()
        loop.perform { trace.append("c3") }
        loop.perform { trace.append("c4") }
        loop.run(tracking, for: .zero)  // not common: every block stays queued, in order
        #expect(trace.all.isEmpty)
        loop.perform(inModes: [tracking]) { trace.append("t2") }
        loop.perform { trace.append("c5") }
        loop.run(.default, for: .zero)
        #expect(trace.text == "c3 c4 c5")
        trace.clear()
        loop.run(tracking, for: .zero)
        #expect(trace.text == "t2")
    }

    @Test("R59 blocks queued while blocks run wait for the next block step")
    func queuedDuringRunWaitForNextStep() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(LoopTimer(fireAt: waiter.virtualNow) { _ in trace.append("timer") }, forMode: .default)
        loop.perform(inModes: [.default]) {
            trace.append("outer")
            loop.perform(inModes: [.default]) { trace.append("inner") }
        }
        loop.run(.default, for: .zero)
        #expect(trace.text == "outer timer inner")
    }

    @Test("R60 a pending block keeps its mode alive; running blocks is not a handled source")
    func keepAliveButNotHandled() {
        let (loop, _) = makeManualLoop()
        let ran = Counter()
        loop.perform(inModes: [.default]) { ran.increment() }
        #expect(loop.run(.default, for: .zero, returnAfterSourceHandled: true) == .timedOut)
        #expect(ran.count == 1)
        #expect(loop.run(.default, for: .zero) == .finished)
    }

    @Test("M10 a pass never sleeps while a matching block is queued, even one queued by a block")
    func neverSleepsWithBlockQueued() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(keepAliveSource(), forMode: .default)
        loop.add(
            LoopObserver(activities: .beforeWaiting, repeats: false) { _, _ in
                // Queued after step 6 decided to block: the wait must still not sleep.
                loop.perform(inModes: [.default]) {
                    trace.append("late-block")
                    loop.stop()
                }
            }, forMode: .default)
        let start = waiter.now()
        #expect(loop.run(.default, for: .seconds(10)) == .stopped)
        #expect(trace.text == "late-block")
        #expect(waiter.now() == start)  // the virtual clock never moved: no sleep
    }

    @Test("M2 a block from another thread wakes a loop sleeping in a matching mode")
    func blockWakesSleepingLoop() throws {
        let loop = try makeEpollLoop()
        let trace = Trace()
        loop.add(keepAliveSource(), forMode: .default)
        let sender = try PlatformThread.spawn {
            _ = eventually { loop.isWaiting }
            loop.perform(inModes: [.default]) {
                trace.append("ran")
                loop.stop()
            }
        }
        #expect(loop.run(.default, for: .seconds(30)) == .stopped)
        sender.join()
        #expect(trace.text == "ran")
    }

    @Test("M2 a block for another mode does not wake the loop")
    func blockForOtherModeDoesNotWake() {
        let (loop, waiter) = makeManualLoop()
        loop.add(keepAliveSource(), forMode: .default)
        let ran = Counter()
        waiter.duringWait.withLock {
            $0 = { _ in loop.perform(inModes: ["other"]) { ran.increment() } }
        }
        let start = waiter.now()
        #expect(loop.run(.default, for: .milliseconds(20)) == .timedOut)
        #expect(waiter.now() - start == 20_000_000)
        #expect(ran.count == 0)
    }
}
