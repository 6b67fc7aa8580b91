import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// SPEC A, B, J: loops and threads, run entry points and results, stop and wake-up.
@Suite("Loop", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopTests {
    // MARK: A. Loops and threads

    @Test("R1 a thread's loop is created on first request and the same afterwards")
    func currentLoopIsPerThread() throws {
        let first = Locked<[ObjectIdentifier]>([])
        for _ in 0..<2 {
            try onNewThread {
                let a = Loop.current
                let b = Loop.current
                #expect(a === b)
                #expect(a.isCurrentThread)
                #expect(a !== Loop.main)
                first.withLock { $0.append(ObjectIdentifier(a)) }
            }
        }
        let ids = first.withLock { $0 }
        // Two threads, two loops (the first was torn down and freed; the identities may be
        // reused, so compare while both are alive instead).
        let pair = Locked<[Loop]>([])
        let ready = Atomic<Int>(0)
        let release = Atomic<Bool>(false)
        let threads = try (0..<2).map { _ in
            try PlatformThread.spawn {
                pair.withLock { $0.append(Loop.current) }
                ready.wrappingAdd(1, ordering: .relaxed)
                while !release.load(ordering: .relaxed) { usleep(100) }
            }
        }
        #expect(eventually { ready.load(ordering: .relaxed) == 2 })
        let loops = pair.withLock { $0 }
        #expect(loops.count == 2 && loops[0] !== loops[1])
        release.store(true, ordering: .relaxed)
        threads.forEach { $0.join() }
        #expect(ids.count == 2)
    }

    @Test("R2 the main loop is one object, bound to the main thread, reachable from any thread")
    func mainLoop() throws {
        let main = Loop.main
        #expect(main === Loop.main)
        #expect(main.description == "main loop")
        try onNewThread {
            #expect(Loop.main === main)
            #expect(!Loop.main.isCurrentThread)
            #expect(Loop.current !== Loop.main)
        }
    }

    @Test("R2 on the main thread, current and main are the same loop")
    @MainActor
    func mainIsCurrentOnMainThread() {
        // The test runner's main actor runs on the process's main thread on Linux.
        guard Loop.main.isCurrentThread else { return }
        #expect(Loop.current === Loop.main)
    }

    @Test("R3 a new loop has the default mode, common set {default}, no current mode, not waiting")
    func newLoop() {
        let (loop, _) = makeManualLoop()
        #expect(loop.allModes == [.default])
        #expect(loop.commonModes == [.default])
        #expect(loop.currentMode == nil)
        #expect(!loop.isWaiting)
        #expect(!loop.isRunning)
    }

    @Test("R4 modes are created on demand and never destroyed; running an unused name is empty")
    func modesOnDemand() {
        let (loop, _) = makeManualLoop()
        let tracking: Loop.Mode = "tracking"
        let timer = LoopTimer(fireAt: .now + .seconds(60)) { _ in }
        loop.add(timer, forMode: tracking)
        #expect(loop.allModes == [.default, tracking])
        loop.remove(timer, forMode: tracking)
        #expect(loop.allModes == [.default, tracking])
        #expect(loop.run("never-used", for: .seconds(1)) == .finished)
        #expect(Loop.Mode("tracking") == tracking)
    }

    // MARK: B. Run entry points and results

    @Test("R10 an empty or unknown mode returns finished at once with no E/X")
    func emptyModeFinishes() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(tracing(trace), forMode: .default)  // observers do not count (SPEC R30)
        #expect(loop.run(.default, for: .seconds(1)) == .finished)
        #expect(loop.run("other") == .finished)
        #expect(trace.text == "")
        #expect(loop.currentMode == nil)
        #expect(waiter.blockingWaits == 0)
    }

    @Test("R10 a source that is never signalled keeps the mode alive")
    func neverSignalledSourceKeepsAlive() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        loop.add(tracing(trace, [.entry, .exit]), forMode: .default)
        loop.add(keepAliveSource(), forMode: .default)
        #expect(loop.run(.default, for: .seconds(1)) == .timedOut)
        #expect(trace.text == "E X")
    }

    @Test("R10 a queued block targeting the mode keeps it alive; one for another mode does not")
    func queuedBlockKeepsAlive() {
        let (loop, _) = makeManualLoop()
        let ran = Counter()
        loop.perform(inModes: ["other"]) { ran.increment() }
        #expect(loop.run(.default, for: .seconds(1)) == .finished)
        #expect(ran.count == 0)
        loop.perform(inModes: [.default]) { ran.increment() }
        // The block keeps the mode alive, so the run enters and the block runs. Emptiness is only
        // checked at the end of the pass (SPEC R14), after the wait: the deadline wins.
        #expect(loop.run(.default, for: .seconds(1)) == .timedOut)
        #expect(ran.count == 1)
        #expect(loop.run(.default, for: .seconds(1)) == .finished)
    }

    @Test("R13 no deadline runs until stopped; a long callout overruns a deadline")
    func deadlineCheckedAtEndOfPass() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(keepAliveSource(), forMode: .default)
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow + .milliseconds(5)) { _ in
                waiter.advance(by: .seconds(2))  // a 2 s callout in a 10 ms run
                trace.append("long")
            }, forMode: .default)
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow + .milliseconds(5)) { _ in trace.append("second") }, forMode: .default)
        let start = waiter.now()
        #expect(loop.run(.default, for: .milliseconds(10)) == .timedOut)
        // Both timers were collected before the first callout and fired in that pass.
        #expect(trace.text == "long second")
        #expect(waiter.now() - start >= 2_000_000_000)
    }

    @Test("R14 precedence: handledSource over timedOut over stopped over finished")
    func endOfPassPrecedence() {
        let (loop, _) = makeManualLoop()
        let source = LoopSource {}
        loop.add(source, forMode: .default)

        // Handled and deadline passed: handledSource.
        source.signal()
        #expect(loop.run(.default, for: .zero, returnAfterSourceHandled: true) == .handledSource)

        // Deadline passed and stop requested: timedOut.
        let stopper = LoopSource { loop.stop() }
        loop.add(stopper, forMode: .default)
        stopper.signal()
        #expect(loop.run(.default, for: .zero) == .timedOut)

        // Stop requested and the mode now empty: stopped.
        let lastTimer = LoopTimer(fireAt: loop.now) { _ in loop.stop() }
        loop.remove(source, forMode: .default)
        loop.remove(stopper, forMode: .default)
        loop.add(lastTimer, forMode: .default)
        #expect(loop.run(.default, for: .seconds(1)) == .stopped)
        // Nothing left: finished.
        #expect(loop.run(.default, for: .seconds(1)) == .finished)
    }

    @Test("R15 timer firings and blocks do not count as a handled source")
    func timersAndBlocksAreNotHandledSources() {
        let (loop, waiter) = makeManualLoop()
        loop.add(keepAliveSource(), forMode: .default)
        let fired = Counter()
        loop.add(LoopTimer(fireAt: waiter.virtualNow + .milliseconds(1)) { _ in fired.increment() }, forMode: .default)
        loop.perform(inModes: [.default]) { fired.increment() }
        #expect(loop.run(.default, for: .milliseconds(5), returnAfterSourceHandled: true) == .timedOut)
        #expect(fired.count == 2)
    }

    @Test("R16 a stop requested by an entry observer ends the run after zero passes: E X")
    func stopFromEntryObserver() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        loop.add(keepAliveSource(), forMode: .default)
        loop.add(LoopObserver(activities: .entry, order: -1) { _, _ in loop.stop() }, forMode: .default)
        loop.add(tracing(trace), forMode: .default)
        #expect(loop.run(.default) == .stopped)
        #expect(trace.text == "E X")
    }

    @Test("R17 every run call notifies E once first and X once last, with the mode being run")
    func entryAndExitOnce() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(keepAliveSource(), forMode: .common)
        loop.addCommonMode("tracking")
        loop.add(
            LoopObserver(activities: [.entry, .exit]) { _, activity in
                trace.append("\(activity)@\(loop.currentMode.map(\.rawValue) ?? "nil")")
            }, forMode: .common)
        _ = waiter
        loop.run(.default, for: .milliseconds(3))
        loop.run("tracking", for: .zero)
        #expect(trace.text == "E@default X@default E@tracking X@tracking")
    }

    @Test("R18 R71 a nested run saves and restores the current mode and its own stop state")
    func nestedRun() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        let inner: Loop.Mode = "inner"
        loop.add(keepAliveSource(), forMode: .default)
        loop.add(keepAliveSource(), forMode: inner)
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow + .milliseconds(1)) { _ in
                trace.append("outer:\(loop.currentMode!)")
                loop.perform(inModes: [inner]) {
                    trace.append("inner:\(loop.currentMode!)")
                    loop.stop()  // stops the inner run only (SPEC R66)
                }
                let result = loop.run(inner, for: .seconds(1))
                trace.append("nested:\(result)")
                trace.append("back:\(loop.currentMode!)")
            }, forMode: .default)
        #expect(loop.run(.default, for: .milliseconds(5)) == .timedOut)
        #expect(trace.text == "outer:default inner:inner nested:stopped back:default")
        #expect(loop.currentMode == nil)
    }

    @Test("R8 M1 run() repeats run calls in the default mode and returns on stop")
    func runForeverHonoursStop() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(tracing(trace, [.entry, .exit]), forMode: .default)
        loop.add(keepAliveSource(), forMode: .default)
        loop.add(LoopTimer(fireAt: waiter.virtualNow + .seconds(1)) { _ in loop.stop() }, forMode: .default)
        loop.run()
        #expect(trace.text == "E X")
    }

    @Test("R8 run() returns when the default mode is empty")
    func runForeverFinishes() {
        let (loop, waiter) = makeManualLoop()
        let fired = Counter()
        loop.add(LoopTimer(fireAt: waiter.virtualNow + .seconds(1)) { _ in fired.increment() }, forMode: .default)
        loop.run()
        #expect(fired.count == 1)
    }

    // MARK: J. Stop, wake-up, waiting, current mode

    @Test("R66 stop() stops the innermost level only and is not remembered when not running")
    func stopInnermostOnly() {
        let (loop, waiter) = makeManualLoop()
        loop.stop()  // not running: forgotten
        loop.add(keepAliveSource(), forMode: .default)
        #expect(loop.run(.default, for: .milliseconds(1)) == .timedOut)

        let trace = Trace()
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow + .milliseconds(1)) { _ in
                loop.perform(inModes: [.default]) { loop.stop() }
                trace.append("nested:\(loop.run(.default, for: .seconds(1)))")
            }, forMode: .default)
        // The stop happens inside the nested run (the innermost level); the outer run times out.
        #expect(loop.run(.default, for: .milliseconds(5)) == .timedOut)
        #expect(trace.text == "nested:stopped")
    }

    @Test("R67 stop() from a callout ends the run at the end of the current pass")
    func stopFromCallout() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        loop.add(tracing(trace, [.beforeWaiting, .afterWaiting]), forMode: .default)
        let source = LoopSource {
            loop.stop()
            trace.append("stop")
        }
        loop.add(source, forMode: .default)
        loop.perform(inModes: [.default]) { trace.append("block") }
        source.signal()
        #expect(loop.run(.default) == .stopped)
        #expect(trace.text == "block stop")
    }

    @Test("R67 R70 stop() from another thread while sleeping: the wait ends, AW, then stopped")
    func stopFromAnotherThreadWhileSleeping() throws {
        let loop = try makeEpollLoop()
        let trace = Trace()
        loop.add(tracing(trace), forMode: .default)
        loop.add(keepAliveSource(), forMode: .default)
        let sawWaiting = Atomic<Bool>(false)
        let stopper = try PlatformThread.spawn {
            if eventually({ loop.isWaiting }) { sawWaiting.store(true, ordering: .relaxed) }
            loop.stop()
        }
        let result = loop.run(.default)
        stopper.join()
        let observedWaiting = sawWaiting.load(ordering: .relaxed)
        #expect(result == .stopped)
        #expect(observedWaiting)
        #expect(trace.text == "E BT BS BW AW X")
        #expect(!loop.isWaiting)
    }

    @Test("R68 wakeUp() ends the current wait of a sleeping loop")
    func wakeUpEndsWait() throws {
        let loop = try makeEpollLoop()
        let trace = Trace()
        loop.add(tracing(trace, [.beforeWaiting, .afterWaiting]), forMode: .default)
        loop.add(keepAliveSource(), forMode: .default)
        let waker = try PlatformThread.spawn {
            _ = eventually { loop.isWaiting }
            loop.wakeUp()
            _ = eventually { trace.count(of: "AW") == 1 && loop.isWaiting }
            loop.stop()
        }
        #expect(loop.run(.default, for: .seconds(30)) == .stopped)
        waker.join()
        #expect(trace.text == "BW AW BW AW")
    }

    @Test("R68 wakeUp() from a callout makes the next wait return at once")
    func wakeUpFromCallout() {
        let (loop, waiter) = makeManualLoop()
        loop.add(keepAliveSource(), forMode: .default)
        loop.perform(inModes: [.default]) { loop.wakeUp() }
        // The block runs at step 3, the pass may block: the wake-up ends that wait at once, so
        // the first blocking wait does not advance the virtual clock.
        let start = waiter.now()
        let trace = Trace()
        loop.add(
            LoopObserver(activities: .afterWaiting) { _, _ in
                trace.append("AW+\((waiter.now() - start) / 1_000_000)ms")
            }, forMode: .default)
        #expect(loop.run(.default, for: .milliseconds(50)) == .timedOut)
        #expect(trace.text == "AW+0ms AW+50ms")
    }

    @Test("R68 M4 a wake-up sent while not running never causes an empty pass later")
    func staleWakeUpIsDiscarded() throws {
        let loop = try makeEpollLoop()
        let trace = Trace()
        loop.add(tracing(trace), forMode: .default)
        loop.add(keepAliveSource(), forMode: .default)
        loop.wakeUp()  // not running: discarded
        #expect(loop.run(.default, for: .milliseconds(30)) == .timedOut)
        #expect(trace.text == "E BT BS BW AW X")
    }

    @Test("M4 work handed over and consumed within a pass does not cost an empty pass later")
    func consumedNotificationIsNotReplayed() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(tracing(trace, [.beforeWaiting, .afterWaiting]), forMode: .default)
        loop.add(keepAliveSource(), forMode: .default)
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow + .milliseconds(1)) { _ in
                trace.append("timer")
                // Handed over after the wait (step 10); it runs at step 11 of this same pass.
                loop.perform(inModes: [.default]) { trace.append("block") }
            }, forMode: .default)
        #expect(loop.run(.default, for: .milliseconds(10)) == .timedOut)
        #expect(trace.text == "BW AW timer block BW AW")
        #expect(waiter.blockingWaits == 2)
    }

    @Test("M4 a late eventfd write is recognized as stale and the loop sleeps on")
    func lateEventfdWriteIsStale() throws {
        let loop = try makeEpollLoop()
        let trace = Trace()
        loop.add(tracing(trace), forMode: .default)
        loop.add(keepAliveSource(), forMode: .default)
        // The write of a notification that was already consumed: the descriptor is readable
        // but nobody is owed a wake-up.
        loop.waiter.wake()
        #expect(loop.run(.default, for: .milliseconds(30)) == .timedOut)
        #expect(trace.text == "E BT BS BW AW X")
    }

    @Test("R70 isWaiting is false in callouts; R71 currentMode is nil when not running")
    func waitingAndCurrentModeInCallouts() {
        let (loop, waiter) = makeManualLoop()
        let seen = Trace()
        loop.add(
            LoopObserver(activities: .allActivities) { _, activity in
                seen.append("\(activity):\(loop.isWaiting):\(loop.currentMode!)")
            }, forMode: .default)
        loop.add(LoopTimer(fireAt: waiter.virtualNow + .milliseconds(1)) { _ in }, forMode: .default)
        loop.run(.default, for: .seconds(1))
        #expect(
            seen.text
                == "E:false:default BT:false:default BS:false:default BW:false:default AW:false:default X:false:default"
        )
        #expect(loop.currentMode == nil)
    }

    @Test("R70 isWaiting is true while the loop is blocked (seen from the manual waiter's wait)")
    func waitingWhileBlocked() {
        let (loop, waiter) = makeManualLoop()
        loop.add(keepAliveSource(), forMode: .default)
        let seen = Locked<Bool?>(nil)
        waiter.duringWait.withLock {
            $0 = { _ in
                seen.withLock { $0 = loop.isWaiting }
                loop.stop()
            }
        }
        #expect(loop.run(.default) == .stopped)
        #expect(seen.withLock { $0 } == true)
    }
}
