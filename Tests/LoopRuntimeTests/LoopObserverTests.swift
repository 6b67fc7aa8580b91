import Synchronization
import Testing

@testable import LoopRuntime

/// SPEC D: observers.
@Suite("LoopObserver (SPEC R24–R31)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopObserverTests {
    @Test("R24 an observer hears only its activities, one at a time")
    func activityMask() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        loop.add(tracing(trace, [.entry, .beforeWaiting, .exit]), forMode: .default)
        loop.add(LoopTimer(fireAt: waiter.virtualNow + .milliseconds(1)) { _ in }, forMode: .default)
        loop.run(.default, for: .seconds(1))
        #expect(trace.text == "E BW X")
    }

    @Test("R24 during a nested run in another mode, the outer mode's observers hear nothing")
    func onlyObserversOfTheRunningMode() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        let modal: Loop.Mode = "modal"
        loop.add(tracing(trace, [.entry, .exit], prefix: "outer:"), forMode: .default)
        loop.add(tracing(trace, [.entry, .exit], prefix: "modal:"), forMode: modal)
        loop.add(keepAliveSource(), forMode: modal)
        loop.add(
            LoopTimer(fireAt: waiter.virtualNow) { _ in
                loop.run(modal, for: .zero)
            }, forMode: .default)
        loop.run(.default, for: .seconds(1))
        #expect(trace.text == "outer:E modal:E modal:X outer:X")
    }

    @Test("R25 observers run in ascending order; equal orders keep insertion order")
    func notificationOrder() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let plan: [(String, Int)] = [("zero-a", 0), ("max", .max), ("min", .min), ("zero-b", 0), ("minus", -3)]
        for (name, order) in plan {
            loop.add(LoopObserver(activities: .entry, order: order) { _, _ in trace.append(name) }, forMode: .default)
        }
        loop.add(keepAliveSource(), forMode: .default)
        loop.run(.default, for: .zero)
        #expect(trace.text == "min minus zero-a zero-b max")
    }

    @Test("R26 adding an observer twice to a mode is a no-op")
    func addTwice() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let observer = tracing(trace, .entry)
        loop.add(observer, forMode: .default)
        loop.add(observer, forMode: .default)
        loop.add(observer, forMode: .common)  // default is common: still one membership
        #expect(loop.contains(observer, forMode: .default))
        loop.add(keepAliveSource(), forMode: .default)
        loop.run(.default, for: .zero)
        #expect(trace.text == "E")
    }

    @Test("R27 a notification calls a snapshot: added ones wait, invalidated ones are skipped, removed ones still run")
    func snapshotRules() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let added = LoopObserver(activities: .entry, order: 10) { _, _ in trace.append("added") }
        let invalidated = LoopObserver(activities: .entry, order: 2) { _, _ in trace.append("invalidated") }
        let removed = LoopObserver(activities: .entry, order: 3) { _, _ in trace.append("removed") }
        let first = LoopObserver(activities: .entry, order: 1) { _, _ in
            trace.append("first")
            loop.add(added, forMode: .default)
            invalidated.invalidate()
            loop.remove(removed, forMode: .default)
        }
        for observer in [first, invalidated, removed] { loop.add(observer, forMode: .default) }
        loop.add(keepAliveSource(), forMode: .default)
        loop.run(.default, for: .zero)
        #expect(trace.text == "first removed")
        trace.clear()
        loop.remove(first, forMode: .default)
        loop.run(.default, for: .zero)
        #expect(trace.text == "added")
    }

    @Test("R28 a one-shot observer is invalidated after its first callout")
    func oneShot() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let observer = LoopObserver(activities: [.entry, .exit], repeats: false) { observer, activity in
            trace.append("\(activity):\(observer.isValid)")
        }
        loop.add(observer, forMode: .default)
        loop.add(keepAliveSource(), forMode: .default)
        loop.run(.default, for: .zero)
        loop.run(.default, for: .zero)
        #expect(trace.text == "E:true")
        #expect(!observer.isValid)
        #expect(!loop.contains(observer, forMode: .default))
    }

    @Test("R29 an observer in its callout hears nothing from a nested run; others do")
    func noReentrancy() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let nesting = LoopObserver(activities: [.beforeSources, .exit]) { _, activity in
            trace.append("nesting:\(activity)")
            if activity == .beforeSources && loop.currentMode == .default {
                loop.run("nested", for: .zero)
            }
        }
        loop.add(nesting, forMode: .common)
        loop.addCommonMode("nested")
        loop.add(tracing(trace, [.beforeSources, .exit], prefix: "other:"), forMode: .common)
        loop.add(keepAliveSource(), forMode: .common)
        loop.run(.default, for: .zero)
        #expect(trace.text == "nesting:BS other:BS other:X other:BS nesting:X other:X")
    }

    @Test("R30 observers never keep a mode alive")
    func observersDoNotKeepAlive() {
        let (loop, _) = makeManualLoop()
        loop.add(LoopObserver(activities: .allActivities) { _, _ in }, forMode: .default)
        #expect(loop.run(.default) == .finished)
    }

    @Test("R31 invalidation detaches from all modes, is idempotent, works inside the callout")
    func invalidation() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let observer = LoopObserver(activities: [.entry, .exit]) { observer, activity in
            trace.append("\(activity)")
            observer.invalidate()
            observer.invalidate()
        }
        loop.add(observer, forMode: .default)
        loop.add(observer, forMode: "other")
        loop.add(keepAliveSource(), forMode: .default)
        loop.run(.default, for: .zero)
        #expect(trace.text == "E")
        #expect(!observer.isValid)
        #expect(!loop.contains(observer, forMode: .default) && !loop.contains(observer, forMode: "other"))
        loop.add(observer, forMode: .default)  // invalid: no-op
        #expect(!loop.contains(observer, forMode: .default))
    }

    @Test("R24 observers attached to no mode cost nothing: the mode's mask is empty")
    func emptyMaskWithoutObservers() {
        let (loop, _) = makeManualLoop()
        let observer = LoopObserver(activities: [.beforeWaiting, .exit]) { _, _ in }
        loop.add(observer, forMode: .default)
        let mode = loop.lock.withLock { loop.state.modes[.default]! }
        #expect(mode.observerActivities.load(ordering: .relaxed) == Loop.Activity([.beforeWaiting, .exit]).rawValue)
        loop.remove(observer, forMode: .default)
        #expect(mode.observerActivities.load(ordering: .relaxed) == 0)
    }

    @Test("R27 an observer removed between runs is let go of by the end of the next run, not kept by a snapshot")
    func removedObserverIsReleased() {
        let (loop, _) = makeManualLoop()
        loop.add(LoopSource {}, forMode: .default)
        let released = Counter()
        do {
            let probe = DeinitProbe { released.increment() }
            let observer = LoopObserver(activities: .allActivities) { _, _ in _ = probe }
            loop.add(observer, forMode: .default)
            loop.run(.default, for: .zero)  // the loop thread's snapshot now holds it too
            loop.remove(observer, forMode: .default)
        }
        loop.run(.default, for: .zero)
        #expect(released.count == 1)
    }

    @Test("R27 an observer removed by another observer's callout is let go of by the time the run returns")
    func observerRemovedMidRunIsReleased() {
        let (loop, _) = makeManualLoop()
        loop.add(LoopSource {}, forMode: .default)
        let released = Counter()
        let removable = Locked<LoopObserver?>(nil)
        do {
            let probe = DeinitProbe { released.increment() }
            let observer = LoopObserver(activities: .entry) { _, _ in _ = probe }
            removable.withLock { $0 = observer }
            loop.add(observer, forMode: .default)
        }
        // Runs last at the exit: removes the other one, whose only other reference is the snapshot.
        let remover = LoopObserver(activities: .exit, order: 1) { _, _ in
            if let observer = removable.withLock({ $0.take() }) { loop.remove(observer, forMode: .default) }
        }
        loop.add(remover, forMode: .default)
        loop.run(.default, for: .zero)
        #expect(released.count == 1)
    }

    @Test("R27 an observer removed after its mode's last run is let go of when the loop runs another mode")
    func removedObserverOfIdleModeIsReleased() {
        let (loop, _) = makeManualLoop()
        loop.add(LoopSource {}, forMode: "a")
        loop.add(LoopSource {}, forMode: "b")
        let released = Counter()
        do {
            let probe = DeinitProbe { released.increment() }
            let observer = LoopObserver(activities: .allActivities) { _, _ in _ = probe }
            loop.add(observer, forMode: "a")
            loop.run("a", for: .zero)
            loop.remove(observer, forMode: "a")  // "a" never runs again
        }
        loop.run("b", for: .zero)
        #expect(released.count == 1)
    }
}
