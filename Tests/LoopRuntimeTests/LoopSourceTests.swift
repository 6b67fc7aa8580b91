import Synchronization
import Testing

@testable import LoopRuntime

/// SPEC F: signalled (v0) sources.
@Suite("LoopSource (SPEC R45–R52)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopSourceTests {
    @Test("R45 signals coalesce; signalling an invalid source does nothing")
    func signalsCoalesce() {
        let (loop, _) = makeManualLoop()
        let performed = Counter()
        let source = LoopSource { performed.increment() }
        loop.add(source, forMode: .default)
        source.signal()
        source.signal()
        #expect(source.isSignalled)
        loop.run(.default, for: .zero)
        #expect(performed.count == 1)
        #expect(!source.isSignalled)

        source.invalidate()
        source.signal()
        #expect(!source.isSignalled)
    }

    @Test("R46 signalled sources are performed by order, then by first-signal time")
    func performOrder() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let sources = [("late-0", 0), ("early-0", 0), ("minus", -5), ("ten", 10)].map { name, order in
            (name, LoopSource(order: order) { trace.append(name) })
        }
        for (_, source) in sources { loop.add(source, forMode: .default) }
        let byName = Dictionary(uniqueKeysWithValues: sources)
        byName["ten"]!.signal()
        byName["early-0"]!.signal()
        byName["late-0"]!.signal()
        byName["minus"]!.signal()
        byName["early-0"]!.signal()  // coalesced: keeps its first-signal time
        loop.run(.default, for: .zero)
        #expect(trace.text == "minus early-0 late-0 ten")
    }

    @Test("R47 with returnAfterSourceHandled, step 4 stops after the first perform")
    func returnAfterFirst() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let a = LoopSource(order: 1) { trace.append("a") }
        let b = LoopSource(order: 2) { trace.append("b") }
        loop.add(a, forMode: .default)
        loop.add(b, forMode: .default)
        a.signal()
        b.signal()
        #expect(loop.run(.default, returnAfterSourceHandled: true) == .handledSource)
        #expect(trace.text == "a")
        #expect(b.isSignalled)
        #expect(loop.run(.default, returnAfterSourceHandled: true) == .handledSource)
        #expect(trace.text == "a b")
    }

    @Test("R48 a source signalled during a perform is performed in the next pass")
    func signalledDuringPerform() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        loop.add(tracing(trace, .beforeSources), forMode: .default)
        let later = LoopSource(order: 2) { trace.append("later") }
        let firstRef = Locked<LoopSource?>(nil)
        let count = Counter()
        let first = LoopSource(order: 1) {
            trace.append("first")
            later.signal()
            if count.increment() == 1 { firstRef.withLock { $0 }?.signal() }
        }
        firstRef.withLock { $0 = first }
        loop.add(first, forMode: .default)
        loop.add(later, forMode: .default)
        first.signal()
        later.signal()

        // Pass 1: `later` is still waiting its turn when `first` signals it, so it is performed
        // once; `first` signals itself, which waits for the next pass.
        loop.run(.default, for: .zero)
        #expect(trace.text == "BS first later")
        // Pass 2: `first` signals `later`, which was not in this pass's snapshot.
        loop.run(.default, for: .zero)
        #expect(trace.text == "BS first later BS first")
        #expect(later.isSignalled)
        loop.run(.default, for: .zero)
        #expect(trace.text == "BS first later BS first BS later")
        firstRef.withLock { $0 = nil }  // `first` holds the box that holds it: no leak
    }

    @Test("R49 invalidated before its turn: skipped; merely removed: still performed")
    func snapshotRules() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let victims = Locked<(LoopSource?, LoopSource?)>((nil, nil))
        let first = LoopSource(order: 0) {
            trace.append("first")
            let (invalidated, removed) = victims.withLock { $0 }
            invalidated?.invalidate()
            removed.map { loop.remove($0, forMode: .default) }
        }
        let invalidated = LoopSource(order: 1) { trace.append("invalidated") }
        let removed = LoopSource(order: 2) { trace.append("removed") }
        victims.withLock { $0 = (invalidated, removed) }
        for source in [first, invalidated, removed] {
            loop.add(source, forMode: .default)
            source.signal()
        }
        loop.run(.default, for: .zero)
        #expect(trace.text == "first removed")
    }

    @Test("R51 schedule once per concrete mode entered; cancel once per mode left")
    func scheduleAndCancel() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let source = LoopSource(
            schedule: { _, mode in trace.append("schedule:\(mode)") },
            cancel: { _, mode in trace.append("cancel:\(mode)") },
            perform: {})
        loop.addCommonMode("tracking")
        loop.add(source, forMode: .common)
        #expect(Set(trace.all) == ["schedule:default", "schedule:tracking"])
        trace.clear()
        loop.add(source, forMode: .common)  // already a common item: nothing
        loop.add(source, forMode: .default)  // already in default: nothing
        #expect(trace.all.isEmpty)
        loop.addCommonMode("modal")  // a new common mode gets the common items (SPEC R62)
        #expect(trace.text == "schedule:modal")
        trace.clear()
        loop.add(source, forMode: "private")
        #expect(trace.text == "schedule:private")
        trace.clear()
        loop.remove(source, forMode: .common)
        #expect(Set(trace.all) == ["cancel:default", "cancel:tracking", "cancel:modal"])
        trace.clear()
        source.invalidate()
        #expect(trace.text == "cancel:private")
        trace.clear()
        source.invalidate()
        #expect(trace.all.isEmpty)
    }

    @Test("R52 a source may be in several loops; adding an invalid source is a no-op")
    func severalLoops() {
        let (loopA, _) = makeManualLoop()
        let (loopB, _) = makeManualLoop()
        let performed = Counter()
        let cancels = Trace()
        let source = LoopSource(cancel: { loop, _ in cancels.append(loop === loopA ? "A" : "B") }) {
            performed.increment()
        }
        loopA.add(source, forMode: .default)
        loopB.add(source, forMode: "b")
        source.signal()
        loopB.run("b", for: .zero)
        loopA.run(.default, for: .zero)  // the signal was consumed by B
        #expect(performed.count == 1)
        source.invalidate()
        #expect(Set(cancels.all) == ["A", "B"])
        #expect(!loopA.contains(source, forMode: .default) && !loopB.contains(source, forMode: "b"))

        let invalid = LoopSource {}
        invalid.invalidate()
        loopA.add(invalid, forMode: .default)
        #expect(!loopA.contains(invalid, forMode: .default))
        #expect(loopA.run(.default, for: .zero) == .finished)
    }

    @Test("R52 a source already signalled when added is performed by the loop")
    func signalledBeforeAdd() {
        let (loop, _) = makeManualLoop()
        let performed = Counter()
        let source = LoopSource { performed.increment() }
        source.signal()
        loop.add(source, forMode: .default)
        loop.run(.default, for: .zero)
        #expect(performed.count == 1)
    }

    @Test("M2 a signal from another thread wakes a sleeping loop")
    func signalWakesSleepingLoop() throws {
        let loop = try makeEpollLoop()
        let trace = Trace()
        let source = LoopSource { trace.append("performed") }
        loop.add(source, forMode: .default)
        let signaller = try PlatformThread.spawn {
            _ = eventually { loop.isWaiting }
            source.signal()
        }
        #expect(loop.run(.default, for: .seconds(30), returnAfterSourceHandled: true) == .handledSource)
        signaller.join()
        #expect(trace.text == "performed")
    }

    @Test("M2 a signal for a mode the loop is not running does not wake it")
    func signalForOtherModeDoesNotWake() {
        let (loop, waiter) = makeManualLoop()
        let source = LoopSource {}
        loop.add(source, forMode: "other")
        loop.add(keepAliveSource(), forMode: .default)
        waiter.duringWait.withLock { $0 = { _ in source.signal() } }
        // The signal during the wait does not end it: the run times out at its deadline.
        let start = waiter.now()
        #expect(loop.run(.default, for: .milliseconds(20)) == .timedOut)
        #expect(waiter.now() - start == 20_000_000)
        #expect(source.isSignalled)
        #expect(loop.run("other", for: .zero, returnAfterSourceHandled: true) == .handledSource)
    }

    @Test("M8 a source handled in step 4 still counts at the end of the pass")
    func handledStaysTrue() {
        let (loop, waiter) = makeManualLoop()
        let a = LoopSource {}
        loop.add(a, forMode: .default)
        loop.add(LoopTimer(fireAt: waiter.virtualNow) { _ in }, forMode: .default)
        a.signal()
        #expect(loop.run(.default, for: .seconds(1), returnAfterSourceHandled: true) == .handledSource)
    }
}
