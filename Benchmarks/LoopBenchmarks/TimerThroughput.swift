import CoreFoundation
import Foundation
import LoopRuntime

/// Scenario 6 (first half): schedule and fire many timers with random deadlines.
enum TimerThroughput {
    static func run(_ scale: Scale) {
        let count = scale.pick(1_000_000, quick: 5_000)
        let loop = Loop.current
        // Random offsets in [0, 50 ms): all become due during the run; the figure includes creating,
        // adding (heap insert) and firing (heap removal) every timer.
        var generator = SystemRandomNumberGenerator()
        let offsets = (0..<count).map { _ in Int64.random(in: 0..<50_000_000, using: &generator) }

        let ours = sample(scale) {
            let fired = PassCounter()
            let elapsed = nanosecondsPerOperation(count) {
                let base = ContinuousClock.now
                for offset in offsets {
                    loop.add(
                        LoopTimer(fireAt: base + .nanoseconds(offset)) { _ in fired.value += 1 }, forMode: .default)
                }
                while fired.value < count { loop.run(.default, for: .seconds(10)) }
            }
            precondition(fired.value == count, "LoopRuntime fired \(fired.value) of \(count) timers")
            return 1e9 / elapsed
        }

        let runLoop = CFRunLoopGetCurrent()
        let theirs = sample(scale) {
            var fired = 0
            let elapsed = nanosecondsPerOperation(count) {
                let base = CFAbsoluteTimeGetCurrent()
                for offset in offsets {
                    let timer = CFRunLoopTimerCreateWithHandler(nil, base + Double(offset) / 1e9, 0, 0, 0) { _ in
                        fired += 1
                    }
                    CFRunLoopAddTimer(runLoop, timer, kCFRunLoopDefaultMode)
                }
                // CF's Linux build never reports its mode empty here (its timerfd counts), so run until all fired.
                while fired < count { _ = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.01, false) }
            }
            precondition(fired == count, "CFRunLoop fired \(fired) of \(count) timers")
            return 1e9 / elapsed
        }
        Report.add(
            ResultLine(
                scenario: "timers", metric: "\(count) random timers scheduled + fired", unit: "timers/s",
                ours: ours, comparisonName: "CFRunLoopTimer", comparison: theirs, higherIsBetter: true))
    }
}
