import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// SPEC E: timers. Virtual time unless the rule is about another thread.
@Suite("LoopTimer (SPEC R32–R44)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopTimerTests {
    /// Milliseconds since `start` on the waiter's virtual clock.
    private func ms(_ waiter: ManualWaiter, since start: Int64) -> Int64 {
        (waiter.now() - start) / 1_000_000
    }

    @Test("R32 a fire date in the past means due now; an invalid timer has no fire date")
    func pastFireDate() {
        let (loop, waiter) = makeManualLoop()
        let fired = Counter()
        let timer = LoopTimer(fireAt: waiter.virtualNow - .seconds(10)) { _ in fired.increment() }
        #expect(timer.fireDate != nil)
        loop.add(timer, forMode: .default)
        #expect(loop.run(.default, for: .zero) == .timedOut)
        #expect(fired.count == 1)
        #expect(!timer.isValid)
        #expect(timer.fireDate == nil)
    }

    @Test("R33 a timer in several modes shares one schedule; adding it twice is a no-op")
    func severalModesOneSchedule() {
        let (loop, waiter) = makeManualLoop()
        let start = waiter.now()
        let fires = Trace()
        let timer = LoopTimer(fireAt: waiter.virtualNow + .milliseconds(10), interval: .milliseconds(10)) { _ in
            fires.append("\(loop.currentMode!)@\((waiter.now() - start) / 1_000_000)")
        }
        loop.add(timer, forMode: .default)
        loop.add(timer, forMode: .default)
        loop.add(timer, forMode: "tracking")
        #expect(loop.contains(timer, forMode: .default) && loop.contains(timer, forMode: "tracking"))
        loop.run(.default, for: .milliseconds(15))  // fires at 10
        loop.run("tracking", for: .milliseconds(10))  // fires at 20, same schedule
        loop.run(.default, for: .milliseconds(10))  // fires at 30
        #expect(fires.text == "default@10 tracking@20 default@30")
        #expect(loop.nextFireDate(forMode: .default) == loop.nextFireDate(forMode: "tracking"))
        timer.invalidate()  // its handler holds the loop, which holds it: no leak
    }

    @Test("R34 a timer fires only in its modes, at the first opportunity after its date")
    func firesOnlyInItsModes() {
        let (loop, waiter) = makeManualLoop()
        let start = waiter.now()
        let fires = Trace()
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow + .milliseconds(5)) { _ in
                fires.append("fired@\((waiter.now() - start) / 1_000_000)")
            }, forMode: .default)
        loop.add(keepAliveSource(), forMode: "other")
        #expect(loop.run("other", for: .milliseconds(20)) == .timedOut)
        #expect(fires.text == "")
        #expect(loop.run(.default, for: .seconds(1)) == .finished)
        #expect(fires.text == "fired@20")  // late, never early
    }

    @Test("R35 due timers fire in ascending fire date, ties in the order they were added")
    func firingOrder() {
        let (loop, waiter) = makeManualLoop()
        let fires = Trace()
        let base = waiter.virtualNow
        let plan: [(String, Int)] = [("c", 3), ("a1", 1), ("b", 2), ("a2", 1), ("a3", 1)]
        for (name, offset) in plan {
            loop.add(LoopTimer(fireAt: base + .milliseconds(offset)) { _ in fires.append(name) }, forMode: .default)
        }
        waiter.advance(by: .milliseconds(10))
        #expect(loop.run(.default, for: .zero) == .timedOut)
        #expect(fires.text == "a1 a2 a3 b c")
    }

    @Test("R35 a timer that becomes due while the batch runs waits for the next pass")
    func dueDuringBatchWaitsForNextPass() {
        let (loop, waiter) = makeManualLoop()
        let fires = Trace()
        loop.add(tracing(fires, .beforeTimers), forMode: .default)
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow + .milliseconds(1)) { _ in
                fires.append("first")
                waiter.advance(by: .milliseconds(10))
            }, forMode: .default)
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow + .milliseconds(5)) { _ in fires.append("second") }, forMode: .default)
        loop.run(.default, for: .seconds(1))
        #expect(fires.text == "BT first BT second")
    }

    @Test("R35 a batch's timer moved by an earlier callout keeps its turn while still due, else waits")
    func batchTimerMovedByACallout() {
        let (loop, waiter) = makeManualLoop()
        let fires = Trace()
        loop.add(tracing(fires, .beforeTimers), forMode: .default)
        let base = waiter.virtualNow
        let stillDue = LoopTimer(fireAt: base + .milliseconds(2)) { _ in fires.append("stillDue") }
        let movedLater = LoopTimer(fireAt: base + .milliseconds(3)) { _ in fires.append("movedLater") }
        let third = LoopTimer(fireAt: base + .milliseconds(4)) { _ in fires.append("third") }
        loop.add(
            LoopTimer(fireAt: base + .milliseconds(1)) { _ in
                fires.append("mover")
                stillDue.setFireDate(base - .seconds(20))  // a past date: still due, keeps its turn
                movedLater.setFireDate(base + .milliseconds(50))  // no longer due: waits for its date
            }, forMode: .default)
        for timer in [stillDue, movedLater, third] { loop.add(timer, forMode: .default) }
        waiter.advance(by: .milliseconds(10))
        #expect(loop.run(.default, for: .zero) == .timedOut)
        #expect(fires.text == "BT mover stillDue third")
        #expect(!stillDue.isValid && movedLater.isValid)
        #expect(loop.run(.default, for: .seconds(1)) == .finished)
        #expect(fires.text == "BT mover stillDue third BT movedLater")
    }

    @Test("LoopTimer(after:) counts its delay from its first add, on the loop's clock")
    func relativeTimerCountsFromItsAdd() {
        let (loop, waiter) = makeManualLoop()
        let start = waiter.now()
        let fires = Trace()
        let timer = LoopTimer(after: .milliseconds(10), tolerance: .milliseconds(2)) { _ in
            fires.append("fired@\(ms(waiter, since: start))")
        }
        // Before its add: the delay from now on the real clock, the tolerance as given.
        let real = ContinuousClock.now
        #expect(timer.fireDate.map { $0 >= real + .milliseconds(10) && $0 < real + .seconds(60) } == true)
        #expect(timer.tolerance == .milliseconds(2))
        timer.tolerance = .milliseconds(3)
        waiter.advance(by: .milliseconds(50))  // time passes before the add
        loop.add(timer, forMode: .default)
        #expect(timer.fireDate == waiter.virtualNow + .milliseconds(10))
        #expect(timer.tolerance == .milliseconds(3))
        loop.run(.default, for: .seconds(1))
        #expect(fires.text == "fired@60" || fires.text == "fired@63")  // within the tolerance window

        // An absolute date set before the add replaces the delay.
        let moved = LoopTimer(after: .seconds(3600)) { _ in fires.append("moved@\(ms(waiter, since: start))") }
        moved.setFireDate(waiter.virtualNow + .milliseconds(5))
        #expect(moved.tolerance == .zero)
        loop.add(moved, forMode: .default)
        #expect(moved.fireDate == waiter.virtualNow + .milliseconds(5))
    }

    @Test("R36 a one-shot timer is invalidated right after its callout returns")
    func oneShotInvalidated() {
        let (loop, waiter) = makeManualLoop()
        let validInCallout = Locked<Bool?>(nil)
        let timer = LoopTimer(fireAt: waiter.virtualNow) { timer in
            validInCallout.withLock { $0 = timer.isValid }
        }
        loop.add(timer, forMode: .default)
        loop.run(.default, for: .zero)
        #expect(validInCallout.withLock { $0 } == true)
        #expect(!timer.isValid)
        #expect(!loop.contains(timer, forMode: .default))
    }

    @Test("R37 a repeating timer skips missed fire points and keeps its phase")
    func skipsMissedFirePoints() {
        let (loop, waiter) = makeManualLoop()
        let start = waiter.now()
        let fires = Trace()
        let calls = Counter()
        let timer = LoopTimer(fireAt: waiter.virtualNow + .milliseconds(100), interval: .milliseconds(100)) { _ in
            fires.append("\((waiter.now() - start) / 1_000_000)")
            if calls.increment() == 1 { waiter.advance(by: .milliseconds(350)) }  // a slow callout
            if calls.count == 3 { loop.stop() }
        }
        loop.add(timer, forMode: .default)
        #expect(loop.run(.default) == .stopped)
        // First at t0+100; the callout ends at t0+450, so the points 200, 300, 400 are missed
        // and it fires once at 500, then 600: phase kept, no backlog.
        #expect(fires.text == "100 500 600")
        #expect(timer.fireDate == LoopTime.instant(start + 700_000_000))
    }

    @Test("R37 SPEC example: interval 100 ms, first callout 350 ms, next at t0+400 then t0+500")
    func specExample() {
        let (loop, waiter) = makeManualLoop()
        let t0 = waiter.now()
        let fires = Trace()
        let calls = Counter()
        loop.add(
            LoopTimer(fireAt: LoopTime.instant(t0), interval: .milliseconds(100)) { _ in
                fires.append("\((waiter.now() - t0) / 1_000_000)")
                if calls.increment() == 1 { waiter.advance(by: .milliseconds(350)) }
                if calls.count == 3 { loop.stop() }
            }, forMode: .default)
        loop.run(.default)
        #expect(fires.text == "0 400 500")
    }

    @Test("R38 a later date set by the timer's own callout is kept; an earlier one is discarded")
    func fireDateChangedInCallout() {
        let (loop, waiter) = makeManualLoop()
        let start = waiter.now()
        let fires = Trace()
        let calls = Counter()
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow + .milliseconds(100), interval: .milliseconds(100)) { timer in
                fires.append("\((waiter.now() - start) / 1_000_000)")
                switch calls.increment() {
                case 1: timer.setFireDate(waiter.virtualNow + .milliseconds(250))  // later: kept (350)
                case 2: timer.setFireDate(waiter.virtualNow - .milliseconds(50))  // earlier: R37 (450)
                default: loop.stop()
                }
            }, forMode: .default)
        loop.run(.default)
        #expect(fires.text == "100 350 450")
    }

    @Test("R39 invalidating a timer inside its own callout stops it for good")
    func invalidateInCallout() {
        let (loop, waiter) = makeManualLoop()
        let fired = Counter()
        let timer = LoopTimer(fireAt: waiter.virtualNow, interval: .milliseconds(1)) { timer in
            fired.increment()
            timer.invalidate()
        }
        loop.add(timer, forMode: .default)
        #expect(loop.run(.default, for: .seconds(1)) == .finished)
        #expect(fired.count == 1)
        #expect(!timer.isValid && timer.fireDate == nil)
    }

    @Test("R40 setting a fire date from outside repositions the timer in all its modes and re-arms")
    func setFireDateFromOutside() {
        let (loop, waiter) = makeManualLoop()
        let start = waiter.now()
        let fires = Trace()
        let early = LoopTimer(fireAt: waiter.virtualNow + .milliseconds(10)) { _ in fires.append("early") }
        let moved = LoopTimer(fireAt: waiter.virtualNow + .milliseconds(50)) { _ in
            fires.append("moved@\((waiter.now() - start) / 1_000_000)")
        }
        loop.add(early, forMode: .common)
        loop.add(moved, forMode: .common)
        loop.addCommonMode("tracking")
        moved.setFireDate(waiter.virtualNow + .milliseconds(5))
        #expect(loop.nextFireDate(forMode: "tracking") == LoopTime.instant(start + 5_000_000))
        #expect(loop.nextFireDate(forMode: .default) == LoopTime.instant(start + 5_000_000))
        loop.run("tracking", for: .seconds(1))
        #expect(fires.text == "moved@5 early")

        // No effect on an invalid timer.
        moved.setFireDate(waiter.virtualNow)
        #expect(moved.fireDate == nil)
    }

    @Test("R40 M7 a sleeping loop re-arms its wait when its earliest timer moves or goes")
    func rearmWhileSleeping() {
        let (loop, waiter) = makeManualLoop()
        let start = waiter.now()
        let soon = LoopTimer(fireAt: waiter.virtualNow + .milliseconds(10)) { _ in }
        let later = LoopTimer(fireAt: waiter.virtualNow + .milliseconds(40)) { _ in }
        let moved = LoopTimer(fireAt: waiter.virtualNow + .seconds(10)) { _ in loop.stop() }
        loop.add(soon, forMode: .default)
        loop.add(later, forMode: .default)
        loop.add(moved, forMode: .default)
        let wakes = Trace()
        loop.add(
            LoopObserver(activities: .afterWaiting) { _, _ in
                wakes.append("\((waiter.now() - start) / 1_000_000)")
            }, forMode: .default)
        let waits = Counter()
        waiter.duringWait.withLock {
            $0 = { _ in
                switch waits.increment() {
                case 1: loop.remove(soon, forMode: .default)  // earliest goes: wake at 40, not 10
                case 2: moved.setFireDate(waiter.virtualNow + .milliseconds(5))  // moves earlier
                default: break
                }
            }
        }
        #expect(loop.run(.default, for: .seconds(100)) == .stopped)
        #expect(wakes.text == "40 45")
    }

    @Test("M7 removing the earliest timer from another thread re-arms without a spurious wake")
    func rearmFromAnotherThread() throws {
        let loop = try makeEpollLoop()
        let trace = Trace()
        loop.add(tracing(trace, [.beforeWaiting, .afterWaiting]), forMode: .default)
        let early = LoopTimer(after: .milliseconds(150)) { _ in trace.append("early-fired") }
        loop.add(early, forMode: .default)
        loop.add(LoopTimer(after: .seconds(60)) { _ in }, forMode: .default)
        let remover = try PlatformThread.spawn {
            _ = eventually { loop.isWaiting }
            loop.remove(early, forMode: .default)
            usleep(400_000)  // past the removed timer's deadline
            loop.stop()
        }
        #expect(loop.run(.default, for: .seconds(30)) == .stopped)
        remover.join()
        // One wait, ended by the stop: no wake-up at the removed timer's deadline.
        #expect(trace.text == "BW AW")
    }

    @Test("R41 a timer added from another thread wakes a sleeping loop at its deadline")
    func addFromAnotherThread() throws {
        let loop = try makeEpollLoop()
        let trace = Trace()
        loop.add(tracing(trace, [.beforeWaiting, .afterWaiting]), forMode: .default)
        loop.add(keepAliveSource(), forMode: .default)
        let adder = try PlatformThread.spawn {
            _ = eventually { loop.isWaiting }
            loop.add(
                LoopTimer(after: .milliseconds(20)) { _ in
                    trace.append("fired")
                    loop.stop()
                }, forMode: .default)
        }
        let started = ContinuousClock.now
        #expect(loop.run(.default, for: .seconds(30)) == .stopped)
        adder.join()
        #expect(trace.text == "BW AW fired")
        #expect(ContinuousClock.now - started < .seconds(20))
    }

    @Test("R41 moving a timer earlier from another thread wakes the sleeping loop at the new date")
    func moveFromAnotherThread() throws {
        let loop = try makeEpollLoop()
        let trace = Trace()
        let timer = LoopTimer(after: .seconds(60)) { _ in trace.append("fired") }
        loop.add(timer, forMode: .default)
        let mover = try PlatformThread.spawn {
            _ = eventually { loop.isWaiting }
            timer.setFireDate(.now + .milliseconds(10))
        }
        let started = ContinuousClock.now
        #expect(loop.run(.default, for: .seconds(30)) == .finished)
        mover.join()
        #expect(trace.text == "fired")
        #expect(ContinuousClock.now - started < .seconds(20))
    }

    @Test("R42 a firing timer is skipped by nested runs and ignored by their waits")
    func firingTimerSkippedByNestedRun() {
        let (loop, waiter) = makeManualLoop()
        let fired = Counter()
        let nestedResults = Trace()
        loop.add(keepAliveSource(), forMode: .default)
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow, interval: .milliseconds(1)) { _ in
                guard fired.increment() == 1 else { return loop.stop() }
                // Ten interval lengths pass inside this callout; the nested run must not re-fire it.
                nestedResults.append("\(loop.run(.default, for: .milliseconds(10)))")
            }, forMode: .default)
        #expect(loop.run(.default) == .stopped)
        #expect(nestedResults.text == "timedOut")
        #expect(fired.count == 2)
    }

    @Test("R43 M9 tolerance coalesces: the loop wakes as late as every due window allows")
    func toleranceCoalesces() {
        let (loop, waiter) = makeManualLoop()
        let start = waiter.now()
        let fires = Trace()
        let base = waiter.virtualNow
        loop.add(
            LoopTimer(fireAt: base + .milliseconds(10), tolerance: .milliseconds(20)) { _ in
                fires.append("a@\((waiter.now() - start) / 1_000_000)")
            }, forMode: .default)
        loop.add(
            LoopTimer(fireAt: base + .milliseconds(25), tolerance: .milliseconds(10)) { _ in
                fires.append("b@\((waiter.now() - start) / 1_000_000)")
            }, forMode: .default)
        loop.add(
            LoopTimer(fireAt: base + .milliseconds(100)) { _ in
                fires.append("c@\((waiter.now() - start) / 1_000_000)")
            }, forMode: .default)
        loop.run(.default, for: .seconds(1))
        // a may fire in [10, 30], b in [25, 35]: one wake-up at 30 fires both; c on its own.
        #expect(fires.text == "a@30 b@30 c@100")
        #expect(waiter.blockingWaits == 2)
    }

    @Test("R43 tolerance is clamped to half the interval for repeating timers, never early")
    func toleranceClamped() {
        let repeating = LoopTimer(fireAt: .now, interval: .milliseconds(100), tolerance: .milliseconds(80)) { _ in }
        #expect(repeating.tolerance == .milliseconds(50))
        let oneShot = LoopTimer(fireAt: .now, tolerance: .seconds(5)) { _ in }
        #expect(oneShot.tolerance == .seconds(5))
        repeating.tolerance = .milliseconds(10)
        #expect(repeating.tolerance == .milliseconds(10))

        let (loop, waiter) = makeManualLoop()
        let start = waiter.now()
        let fires = Trace()
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow + .milliseconds(10), tolerance: .milliseconds(5)) { _ in
                fires.append("\((waiter.now() - start) / 1_000_000)")
            }, forMode: .default)
        loop.run(.default, for: .seconds(1))
        #expect(fires.text == "15")  // as late as allowed, not before 10
    }

    @Test("R43 a real loop honours tolerance and never fires early")
    func realToleranceNeverEarly() throws {
        let loop = try makeEpollLoop()
        let fireDate = ContinuousClock.now + .milliseconds(20)
        let firedAt = Locked<ContinuousClock.Instant?>(nil)
        loop.add(
            LoopTimer(fireAt: fireDate, tolerance: .milliseconds(5)) { _ in
                firedAt.withLock { $0 = .now }
            }, forMode: .default)
        #expect(loop.run(.default, for: .seconds(30)) == .finished)
        let fired = try #require(firedAt.withLock { $0 })
        #expect(fired >= fireDate)
    }

    @Test("R44 the loop reports the next fire date of a mode, none without timers")
    func nextFireDate() {
        let (loop, waiter) = makeManualLoop()
        #expect(loop.nextFireDate(forMode: .default) == nil)
        let date = waiter.virtualNow + .seconds(3)
        loop.add(LoopTimer(fireAt: date + .seconds(1)) { _ in }, forMode: .default)
        loop.add(LoopTimer(fireAt: date) { _ in }, forMode: .default)
        #expect(loop.nextFireDate(forMode: .default) == date)
        #expect(loop.nextFireDate(forMode: "elsewhere") == nil)
        #expect(loop.nextFireDate(forMode: .common) == date)
    }

    @Test("R37 the next fire date lands strictly after now, whole intervals from the scheduled date")
    func nextFireDateArithmetic() {
        #expect(Loop.nextFireDate(after: 100, interval: 100, now: 100) == 200)
        #expect(Loop.nextFireDate(after: 100, interval: 100, now: 199) == 200)
        #expect(Loop.nextFireDate(after: 100, interval: 100, now: 200) == 300)
        #expect(Loop.nextFireDate(after: 100, interval: 100, now: 450) == 500)
        #expect(Loop.nextFireDate(after: .max - 10, interval: 100, now: .max - 5) == LoopTime.distantFuture)
    }
}
