import CBenchmarkSupport
import CoreFoundation
import Foundation
import LoopRuntime

/// Scenario 7: the cost of a pass with nothing to do, and of observer dispatch, against CFRunLoop.
enum EmptyPass {
    static func run(_ scale: Scale) {
        let calls = scale.pick(1_000_000, quick: 2_000)

        // A run call with a zero timeout: entry, one non-blocking pass, exit (SPEC R12).
        let loop = Loop.current
        let keepAlive = LoopSource {}
        loop.add(keepAlive, forMode: .default)
        let ours = sample(scale) {
            nanosecondsPerOperation(calls) {
                for _ in 0..<calls { loop.run(.default, for: .zero) }
            }
        }
        let cf = CFSide()
        let theirs = sample(scale) {
            nanosecondsPerOperation(calls) {
                for _ in 0..<calls { _ = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0, false) }
            }
        }
        Report.add(
            ResultLine(
                scenario: "empty-pass", metric: "run(for: .zero), no observers", unit: "ns",
                ours: ours, comparisonName: "CFRunLoopRunInMode(0)", comparison: theirs, higherIsBetter: false))

        let allocationsBefore = cmalloc_counter_allocations()
        for _ in 0..<calls { loop.run(.default, for: .zero) }
        let perCall = Double(cmalloc_counter_allocations() - allocationsBefore) / Double(calls)
        let cfBefore = cmalloc_counter_allocations()
        for _ in 0..<calls { _ = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0, false) }
        let cfPerCall = Double(cmalloc_counter_allocations() - cfBefore) / Double(calls)
        Report.add(
            ResultLine(
                scenario: "empty-pass", metric: "allocations per run(for: .zero)", unit: "allocs",
                ours: Stats([perCall]), comparisonName: "CFRunLoopRunInMode(0)",
                comparison: Stats([max(cfPerCall, 1e-9)]), higherIsBetter: false))

        // Observer dispatch: 1 and 8 observers of every activity.
        for count in [1, 8] {
            let observers = (0..<count).map { _ in LoopObserver(activities: .allActivities) { _, _ in } }
            observers.forEach { loop.add($0, forMode: .default) }
            let withObservers = sample(scale) {
                nanosecondsPerOperation(calls) {
                    for _ in 0..<calls { loop.run(.default, for: .zero) }
                }
            }
            let cfObservers = (0..<count).map { _ in cf.addObserver() }
            let cfWith = sample(scale) {
                nanosecondsPerOperation(calls) {
                    for _ in 0..<calls { _ = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0, false) }
                }
            }
            cfObservers.forEach { CFRunLoopObserverInvalidate($0) }
            observers.forEach { $0.invalidate() }
            Report.add(
                ResultLine(
                    scenario: "empty-pass", metric: "run(for: .zero), \(count) observer(s) (E BT BS X)", unit: "ns",
                    ours: withObservers, comparisonName: "CF", comparison: cfWith, higherIsBetter: false))
        }

        // Passes of a run that never sleeps: a source that signals itself each time it is
        // performed, so every pass performs one source and polls.
        let passes = calls
        let counter = PassCounter()
        let selfSignalling = SelfSignallingSource(limit: passes, loop: loop, counter: counter)
        let oursPass = sample(scale) {
            counter.value = 0
            selfSignalling.source.signal()
            return nanosecondsPerOperation(passes) { loop.run(.default) }
        }
        selfSignalling.source.invalidate()
        let cfPass = sample(scale) {
            nanosecondsPerOperation(passes) { cf.runSelfSignalling(passes) }
        }
        Report.add(
            ResultLine(
                scenario: "empty-pass", metric: "pass performing one self-signalling source", unit: "ns",
                ours: oursPass, comparisonName: "CF v0 source", comparison: cfPass, higherIsBetter: false))
        keepAlive.invalidate()
        cf.invalidate()
    }
}

final class PassCounter: @unchecked Sendable {
    var value = 0
}

/// A source that re-signals itself until `limit` performs, then stops the loop.
final class SelfSignallingSource: @unchecked Sendable {
    var source: LoopSource!
    init(limit: Int, loop: Loop, counter: PassCounter) {
        let box = Unmanaged.passUnretained(self)
        source = LoopSource {
            counter.value += 1
            if counter.value >= limit { loop.stop() } else { box.takeUnretainedValue().source.signal() }
        }
        loop.add(source, forMode: .default)
    }
}

/// The CFRunLoop side: a v0 source in the default mode of the current thread's CF loop.
final class CFSide {
    let runLoop = CFRunLoopGetCurrent()
    var keepAlive: CFRunLoopSource!
    var counterSource: CFRunLoopSource?
    var remaining = 0

    init() {
        var context = CFRunLoopSourceContext()
        context.perform = { _ in }
        keepAlive = CFRunLoopSourceCreate(nil, 0, &context)
        CFRunLoopAddSource(runLoop, keepAlive, kCFRunLoopDefaultMode)
    }

    func addObserver() -> CFRunLoopObserver {
        let observer = CFRunLoopObserverCreateWithHandler(nil, CFRunLoopActivity.allActivities.rawValue, true, 0) {
            _, _ in
        }!
        CFRunLoopAddObserver(runLoop, observer, kCFRunLoopDefaultMode)
        return observer
    }

    func runSelfSignalling(_ passes: Int) {
        remaining = passes
        var context = CFRunLoopSourceContext()
        context.info = Unmanaged.passUnretained(self).toOpaque()
        context.perform = { info in
            let side = Unmanaged<CFSide>.fromOpaque(info!).takeUnretainedValue()
            side.remaining -= 1
            if side.remaining <= 0 {
                CFRunLoopStop(side.runLoop)
            } else {
                CFRunLoopSourceSignal(side.counterSource)
            }
        }
        let source = CFRunLoopSourceCreate(nil, 0, &context)!
        counterSource = source
        CFRunLoopAddSource(runLoop, source, kCFRunLoopDefaultMode)
        CFRunLoopSourceSignal(source)
        _ = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 1e9, false)
        CFRunLoopSourceInvalidate(source)
        counterSource = nil
    }

    func invalidate() {
        CFRunLoopSourceInvalidate(keepAlive)
    }
}
