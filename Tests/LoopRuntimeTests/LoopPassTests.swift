import Testing

@testable import LoopRuntime

/// SPEC C: the phases of one pass, their order, and the wait.
@Suite("Loop pass (SPEC R19–R23)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopPassTests {
    @Test("R19 R21 a pass that may block notifies BT BS BW AW, then the timer fires")
    func passWithWait() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(tracing(trace), forMode: .default)
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow + .milliseconds(10)) { _ in trace.append("timer") }, forMode: .default)

        let result = loop.run(.default, for: .seconds(1))

        #expect(result == .finished)  // the one-shot timer was the mode's only item
        #expect(trace.text == "E BT BS BW AW timer X")
    }

    @Test("R20 BT and BS are sent at the top of every pass even with nothing due")
    func beforeTimersAndSourcesEveryPass() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(tracing(trace, [.beforeTimers, .beforeSources, .beforeWaiting]), forMode: .default)
        loop.add(keepAliveSource(), forMode: .default)
        // Two wake-ups with nothing to do, then a stop: three passes.
        let waits = Counter()
        waiter.duringWait.withLock {
            $0 = { _ in
                if waits.increment() <= 2 { loop.wakeUp() } else { loop.stop() }
            }
        }
        #expect(loop.run(.default) == .stopped)
        #expect(trace.text == "BT BS BW BT BS BW BT BS BW")
    }

    @Test("R23 callout order: blocks, v0 performs, blocks, wait, timers, blocks")
    func calloutOrder() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        let source = LoopSource { trace.append("source") }
        loop.add(source, forMode: .default)
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow) { _ in
                trace.append("timer")
                loop.perform(inModes: [.default]) { trace.append("block-from-timer") }
            }, forMode: .default)
        loop.perform(inModes: [.default]) {
            trace.append("block1")
            loop.perform(inModes: [.default]) { trace.append("block-from-block") }
        }
        source.signal()

        let result = loop.run(.default, for: .zero)

        #expect(result == .timedOut)
        #expect(trace.text == "block1 source block-from-block timer block-from-timer")
    }

    @Test("R19 step 5 runs blocks again only if a source was performed; M10 no sleep with a block queued")
    func secondBlockStepOnlyAfterPerform() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(tracing(trace, [.beforeWaiting, .afterWaiting]), forMode: .default)
        loop.add(keepAliveSource(), forMode: .default)
        loop.add(LoopTimer(fireAt: waiter.virtualNow) { _ in trace.append("timer") }, forMode: .default)
        loop.perform(inModes: [.default]) {
            trace.append("block1")
            loop.perform(inModes: [.default]) { trace.append("block2") }
        }
        // No source is performed, so block2 (queued by block1) waits for step 11, after the timers;
        // and the first pass does not block because a matching block is queued (SPEC M10).
        #expect(loop.run(.default, for: .seconds(1)) == .timedOut)
        #expect(trace.text == "block1 timer block2 BW AW")
        #expect(waiter.blockingWaits == 1)
    }

    @Test("R12 a zero timeout makes one non-blocking pass with no BW/AW")
    func zeroTimeout() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(tracing(trace), forMode: .default)
        loop.add(keepAliveSource(), forMode: .default)

        #expect(loop.run(.default, for: .zero) == .timedOut)
        #expect(trace.text == "E BT BS X")
        #expect(waiter.blockingWaits == 0)

        trace.clear()
        #expect(loop.run(.default, until: waiter.virtualNow - .seconds(1)) == .timedOut)
        #expect(trace.text == "E BT BS X")

        trace.clear()
        #expect(loop.run(.default, for: .seconds(-3)) == .timedOut)
        #expect(trace.text == "E BT BS X")
    }

    @Test("R12 a zero-timeout pass that performs a source returns handledSource when asked")
    func zeroTimeoutHandledSource() {
        let (loop, _) = makeManualLoop()
        let source = LoopSource {}
        loop.add(source, forMode: .default)
        source.signal()
        #expect(loop.run(.default, for: .zero, returnAfterSourceHandled: true) == .handledSource)
        source.signal()
        #expect(loop.run(.default, for: .zero, returnAfterSourceHandled: false) == .timedOut)
    }

    @Test("R21 no BW/AW after a handled source: the pass polls")
    func noWaitAfterHandledSource() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(tracing(trace, [.beforeWaiting, .afterWaiting, .beforeSources]), forMode: .default)
        let source = LoopSource { trace.append("perform") }
        loop.add(source, forMode: .default)
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow + .milliseconds(5)) { _ in trace.append("timer") }, forMode: .default)
        source.signal()
        // Pass 1 performs and polls (no BW/AW); pass 2 waits for the timer; then only the
        // never-again-signalled source is left, until the deadline.
        _ = loop.run(.default, for: .milliseconds(10))
        #expect(trace.text == "BS perform BS BW AW timer BS BW AW")
    }

    @Test("M3 every due timer fires after one wait (one pass)")
    func allDueTimersInOnePass() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(tracing(trace, [.afterWaiting]), forMode: .default)
        let date = waiter.virtualNow + .milliseconds(3)
        for name in ["a", "b", "c"] {
            loop.add(LoopTimer(fireAt: date) { _ in trace.append(name) }, forMode: .default)
        }
        #expect(loop.run(.default, for: .seconds(1)) == .finished)
        #expect(trace.text == "AW a b c")
        #expect(waiter.blockingWaits == 1)
    }

    #if DEBUG
        @Test(
            "An empty run call takes the loop's lock twice (entry, exit) and its pass not at all; a blocking pass adds two"
        )
        func lockTakenOnlyForWork() {
            let (loop, waiter) = makeManualLoop()
            loop.add(keepAliveSource(), forMode: .default)
            loop.add(LoopTimer(fireAt: waiter.virtualNow + .seconds(3600)) { _ in }, forMode: .default)
            loop.run(.default, for: .zero)  // warm-up: mode lookups cached, heap mirror set
            var before = loop.lock.acquisitions.load(ordering: .relaxed)
            for _ in 0..<10 { loop.run(.default, for: .zero) }
            #expect(loop.lock.acquisitions.load(ordering: .relaxed) - before == 20)

            // A pass that blocks: the sleep decision and the wake each take it once, and the
            // end-of-pass check (stop request, emptiness) once more; the timed-out run's entry and
            // exit are the other two.
            before = loop.lock.acquisitions.load(ordering: .relaxed)
            #expect(loop.run(.default, for: .milliseconds(10)) == .timedOut)
            #expect(loop.lock.acquisitions.load(ordering: .relaxed) - before <= 5)

            // Work makes the pass look: a queued block costs the block steps' lock.
            before = loop.lock.acquisitions.load(ordering: .relaxed)
            loop.perform(inModes: [.default]) {}
            loop.run(.default, for: .zero)
            #expect(loop.lock.acquisitions.load(ordering: .relaxed) - before > 3)
        }
    #endif

    @Test("R42 R47 a nested run from a source's callout performs the outer pass's sources still waiting")
    func nestedRunPerformsTheOuterBatch() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let later = LoopSource(order: 1) { trace.append("later") }
        let first = LoopSource(order: 0) {
            trace.append("first")
            // The outer pass collected `later` too: the nested run performs it (as CFRunLoop).
            trace.append("nested:\(loop.run(.default, for: .zero, returnAfterSourceHandled: true))")
        }
        loop.add(first, forMode: .default)
        loop.add(later, forMode: .default)
        first.signal()
        later.signal()
        #expect(loop.run(.default, for: .zero) == .timedOut)
        // Performed once: by the nested run; the outer pass finds it done.
        #expect(trace.text == "first later nested:handledSource")
    }

    @Test("R42 a nested run from a timer's callout fires the outer batch's due timers, not the firing one")
    func nestedRunFiresTheOuterTimers() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        let now = LoopTime.instant(waiter.now())
        let second = LoopTimer(fireAt: now - .seconds(1)) { _ in trace.append("second") }
        let first = LoopTimer(fireAt: now - .seconds(2)) { _ in
            trace.append("first")
            loop.run(.default, for: .zero)  // `second` is due and waiting: fired here
            trace.append("nested done")
        }
        loop.add(first, forMode: .default)
        loop.add(second, forMode: .default)
        loop.add(keepAliveSource(), forMode: .default)
        #expect(loop.run(.default, for: .zero) == .timedOut)
        #expect(trace.text == "first second nested done")
        #expect(!first.isValid && !second.isValid)
        #expect(loop.timerCount(forMode: .default) == 0)
    }
}
