import CBenchmarkSupport
import CoreFoundation
import Foundation
import LoopRuntime

/// Scenario 6 (second half) and 9: how late 10,000 timers fire, against CFRunLoop timers and
/// Foundation's `Timer`, and what scheduling a timer allocates.
enum TimerLateness {
    static func run(_ scale: Scale) {
        let count = scale.pick(10_000, quick: 500)
        // Fire dates spread over 200 ms starting 50 ms out; zero tolerance everywhere.
        let offsets = (0..<count).map { 50_000 + $0 * 200_000 / count }  // microseconds

        let loop = Loop.current
        let ours = percentiles(
            (0..<(scale.quick ? 1 : 3)).flatMap { _ -> [Double] in
                let lateness = UnsafeLateness(count)
                let base = ContinuousClock.now
                for (index, offset) in offsets.enumerated() {
                    let date = base + .microseconds(Int64(offset))
                    loop.add(
                        LoopTimer(fireAt: date) { _ in lateness.record(index, ContinuousClock.now - date) },
                        forMode: .default)
                }
                while lateness.recorded < count { loop.run(.default, for: .seconds(5)) }
                return lateness.values
            })

        let runLoop = CFRunLoopGetCurrent()
        let cf = percentiles(
            (0..<(scale.quick ? 1 : 3)).flatMap { _ -> [Double] in
                let lateness = UnsafeLateness(count)
                let base = CFAbsoluteTimeGetCurrent()
                for (index, offset) in offsets.enumerated() {
                    let date = base + Double(offset) / 1e6
                    let timer = CFRunLoopTimerCreateWithHandler(nil, date, 0, 0, 0) { _ in
                        lateness.record(index, .nanoseconds(Int64((CFAbsoluteTimeGetCurrent() - date) * 1e9)))
                    }
                    CFRunLoopAddTimer(runLoop, timer, kCFRunLoopDefaultMode)
                }
                while lateness.recorded < count { _ = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.05, false) }
                return lateness.values
            })

        let foundation = percentiles(
            (0..<(scale.quick ? 1 : 3)).flatMap { _ -> [Double] in
                let lateness = UnsafeLateness(count)
                let base = Date()
                for (index, offset) in offsets.enumerated() {
                    // An explicit fire date: on Linux, Timer(timeInterval:) fires at creation.
                    let date = base.addingTimeInterval(Double(offset) / 1e6)
                    let timer = Timer(fire: date, interval: 0, repeats: false) { _ in
                        lateness.record(index, .nanoseconds(Int64(Date().timeIntervalSince(date) * 1e9)))
                    }
                    RunLoop.current.add(timer, forMode: .default)
                }
                while lateness.recorded < count {
                    _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.05))
                }
                return lateness.values
            })

        for (name, pick) in [("p50", \Percentiles.p50), ("p99", \Percentiles.p99)] {
            Report.add(
                ResultLine(
                    scenario: "lateness", metric: "\(count) timers, \(name) lateness", unit: "µs",
                    ours: Stats([ours[keyPath: pick]]), comparisonName: "CFRunLoopTimer",
                    comparison: Stats([cf[keyPath: pick]]), higherIsBetter: false))
            Report.add(
                ResultLine(
                    scenario: "lateness", metric: "\(count) timers, \(name) lateness", unit: "µs",
                    ours: Stats([ours[keyPath: pick]]), comparisonName: "Foundation Timer",
                    comparison: Stats([foundation[keyPath: pick]]), higherIsBetter: false))
        }

        // Allocations per timer scheduled and fired (the timer object and its closure are the
        // caller's; the rest is the loop's).
        let batch = scale.pick(10_000, quick: 500)
        func oursOnce() {
            let fired = PassCounter()
            let base = ContinuousClock.now
            for _ in 0..<batch { loop.add(LoopTimer(fireAt: base) { _ in fired.value += 1 }, forMode: .default) }
            while fired.value < batch { loop.run(.default, for: .seconds(5)) }
        }
        oursOnce()
        let before = cmalloc_counter_allocations()
        oursOnce()
        let oursAllocations = Double(cmalloc_counter_allocations() - before) / Double(batch)
        func cfOnce() {
            var fired = 0
            let base = CFAbsoluteTimeGetCurrent()
            for _ in 0..<batch {
                CFRunLoopAddTimer(
                    runLoop, CFRunLoopTimerCreateWithHandler(nil, base, 0, 0, 0) { _ in fired += 1 },
                    kCFRunLoopDefaultMode)
            }
            while fired < batch { _ = CFRunLoopRunInMode(kCFRunLoopDefaultMode, 0.05, false) }
        }
        cfOnce()
        let cfBefore = cmalloc_counter_allocations()
        cfOnce()
        let cfAllocations = Double(cmalloc_counter_allocations() - cfBefore) / Double(batch)
        Report.add(
            ResultLine(
                scenario: "lateness", metric: "allocations per timer scheduled + fired", unit: "allocs",
                ours: Stats([oursAllocations]), comparisonName: "CFRunLoopTimer", comparison: Stats([cfAllocations]),
                higherIsBetter: false))
    }

    struct Percentiles {
        let p50: Double
        let p99: Double
    }

    static func percentiles(_ values: [Double]) -> Percentiles {
        let sorted = values.sorted()
        return Percentiles(p50: sorted[sorted.count / 2], p99: sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
    }
}

/// Lateness per timer, in microseconds. Written on the loop's thread only.
final class UnsafeLateness: @unchecked Sendable {
    var values: [Double]
    var recorded = 0
    init(_ count: Int) { values = Array(repeating: 0, count: count) }
    func record(_ index: Int, _ lateness: Duration) {
        let (seconds, attoseconds) = lateness.components
        values[index] = Double(seconds) * 1e6 + Double(attoseconds) / 1e12
        recorded += 1
    }
}
