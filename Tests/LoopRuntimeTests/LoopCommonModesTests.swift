import Testing

@testable import LoopRuntime

/// SPEC I: common modes.
@Suite("Loop common modes (SPEC R62–R64)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopCommonModesTests {
    @Test("R62 adding a mode to the common set copies every common item into it")
    func addCommonModeCopiesItems() {
        let (loop, waiter) = makeManualLoop()
        let trace = Trace()
        let timer = LoopTimer(fireAt: waiter.virtualNow) { _ in trace.append("timer") }
        let observer = tracing(trace, .entry)
        let source = LoopSource { trace.append("source") }
        loop.add(timer, forMode: .common)
        loop.add(observer, forMode: .common)
        loop.add(source, forMode: .common)
        let tracking: Loop.Mode = "tracking"
        #expect(loop.run(tracking, for: .zero) == .finished)  // not common yet: empty
        loop.addCommonMode(tracking)
        loop.addCommonMode(tracking)  // idempotent
        #expect(loop.commonModes == [.default, tracking])
        #expect(loop.contains(timer, forMode: tracking))
        #expect(loop.contains(observer, forMode: tracking))
        #expect(loop.contains(source, forMode: tracking))
        source.signal()
        loop.run(tracking, for: .zero)
        #expect(trace.text == "E source timer")
    }

    @Test("R63 an item added to .common is in every common mode; removing it from .common removes it from all")
    func commonItems() {
        let (loop, _) = makeManualLoop()
        loop.addCommonMode("a")
        loop.addCommonMode("b")
        let timer = LoopTimer(fireAt: .now + .seconds(60)) { _ in }
        loop.add(timer, forMode: .common)
        for mode: Loop.Mode in [.default, "a", "b", .common] {
            #expect(loop.contains(timer, forMode: mode))
        }
        #expect(!loop.contains(timer, forMode: "c"))
        loop.remove(timer, forMode: .common)
        for mode: Loop.Mode in [.default, "a", "b", .common] {
            #expect(!loop.contains(timer, forMode: mode))
        }
        #expect(timer.isValid)
    }

    @Test("R64 removing a common item from one mode affects only that mode; it stays common")
    func removeFromOneMode() {
        let (loop, _) = makeManualLoop()
        loop.addCommonMode("a")
        let observer = LoopObserver(activities: .entry) { _, _ in }
        loop.add(observer, forMode: .common)
        loop.remove(observer, forMode: "a")
        #expect(!loop.contains(observer, forMode: "a"))
        #expect(loop.contains(observer, forMode: .default))
        #expect(loop.contains(observer, forMode: .common))
        loop.addCommonMode("b")
        #expect(loop.contains(observer, forMode: "b"))
    }

    @Test("R64 an item added directly to a mode that later becomes common is not a common item")
    func directItemIsNotCommon() {
        let (loop, _) = makeManualLoop()
        let source = LoopSource {}
        loop.add(source, forMode: "a")
        loop.addCommonMode("a")
        #expect(!loop.contains(source, forMode: .common))
        loop.addCommonMode("b")
        #expect(!loop.contains(source, forMode: "b"))
    }

    @Test("R62 R64 a common source removed from every mode still reaches a mode made common later")
    func commonSourceRemovedThenCopied() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let source = LoopSource { trace.append("performed in \(loop.currentMode!)") }
        loop.add(source, forMode: .common)
        loop.remove(source, forMode: .default)  // still a common item (R64), in no mode now
        loop.addCommonMode("modal")  // copied into it (R62)
        source.signal()
        #expect(loop.run("modal", for: .zero) == .timedOut)
        #expect(trace.text == "performed in modal")
    }

    @Test("R63 adding a common item to .common again puts it back into every common mode")
    func commonItemAddedAgain() {
        let (loop, _) = makeManualLoop()
        loop.addCommonMode("modal")
        let source = LoopSource {}
        let timer = LoopTimer(fireAt: .now + .seconds(3_600)) { _ in }
        let observer = LoopObserver(activities: .entry) { _, _ in }
        loop.add(source, forMode: .common)
        loop.add(timer, forMode: .common)
        loop.add(observer, forMode: .common)
        loop.remove(source, forMode: .default)
        loop.remove(timer, forMode: "modal")
        loop.remove(observer, forMode: .default)
        loop.add(source, forMode: .common)
        loop.add(timer, forMode: .common)
        loop.add(observer, forMode: .common)
        #expect(loop.contains(source, forMode: .default) && loop.contains(source, forMode: "modal"))
        #expect(loop.contains(timer, forMode: .default) && loop.contains(timer, forMode: "modal"))
        #expect(loop.contains(observer, forMode: .default) && loop.contains(observer, forMode: "modal"))
        timer.invalidate()
    }
}
