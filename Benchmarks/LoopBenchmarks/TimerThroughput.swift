import CBenchmarkSupport
import CLoopRuntimeShims
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
        let offsets = randomOffsets(count)

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

        scheduleAndMemory(scale, offsets: offsets)
    }

    /// The `timer-schedule` scenario: the schedule-cost and memory metrics of `timers` alone (no
    /// fire-rate comparison, whose CFRunLoop half takes minutes).
    static func runSchedule(_ scale: Scale) {
        scheduleAndMemory(scale, offsets: randomOffsets(scale.pick(1_000_000, quick: 5_000)))
    }

    private static func randomOffsets(_ count: Int) -> [Int64] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in Int64.random(in: 0..<50_000_000, using: &generator) }
    }

    private static func scheduleAndMemory(_ scale: Scale, offsets: [Int64]) {
        for pending in scale.quick ? [1_000, 5_000] : [10_000, 100_000, 1_000_000] {
            scheduleCost(pending: pending, offsets: offsets, scale: scale)
        }
        for pending in scale.quick ? [1_000, 5_000] : [10_000, 100_000, 1_000_000] {
            marginalScheduleCost(pending: pending, offsets: offsets, scale: scale)
        }
        memory(count: offsets.count, offsets: offsets, scale: scale)
    }

    /// The cost of creating and adding one timer when `pending` timers are pending in the mode
    /// (all far in the future, so none fires), ours and CF's; each sample ends by invalidating them.
    /// The figure should not grow with `pending` (a flat schedule cost, issue #14).
    private static func scheduleCost(pending: Int, offsets: [Int64], scale: Scale) {
        let loop = Loop.current
        // Each sample also splits its time into the thread's user and system CPU and the page
        // faults it took: faults are where a sample that gets fresh memory instead of reusing the
        // last one's shows (BENCHMARKS.md, seventh session of issue #14).
        var userCosts: [Double] = []
        var systemCosts: [Double] = []
        var faultCounts: [Double] = []
        let ours = sample(scale) {
            var timers: [LoopTimer] = []
            timers.reserveCapacity(pending)
            let base = ContinuousClock.now + .seconds(3_600)
            let before = ThreadSplit.now()
            let cost = nanosecondsPerOperation(pending) {
                for index in 0..<pending {
                    let timer = LoopTimer(fireAt: base + .nanoseconds(offsets[index % offsets.count])) { _ in }
                    loop.add(timer, forMode: .default)
                    timers.append(timer)
                }
            }
            let after = ThreadSplit.now()
            userCosts.append((after.userMicroseconds - before.userMicroseconds) * 1_000 / Double(pending))
            systemCosts.append((after.systemMicroseconds - before.systemMicroseconds) * 1_000 / Double(pending))
            faultCounts.append((after.minorFaults - before.minorFaults) * 1_000 / Double(pending))
            for timer in timers { timer.invalidate() }
            loop.run(.default, for: .zero)  // gives the invalidated timers back
            return cost
        }
        // CF keeps a mode's timers in a sorted array (an insertion moves half of it): a million
        // pending would take minutes, so it is compared up to 100,000.
        let runLoop = CFRunLoopGetCurrent()
        let theirs: Stats? =
            pending > 100_000
            ? nil
            : sample(scale) {
                var timers: [CFRunLoopTimer] = []
                timers.reserveCapacity(pending)
                let base = CFAbsoluteTimeGetCurrent() + 3_600
                let cost = nanosecondsPerOperation(pending) {
                    for index in 0..<pending {
                        let date = base + Double(offsets[index % offsets.count]) / 1e9
                        let timer = CFRunLoopTimerCreateWithHandler(nil, date, 0, 0, 0) { _ in }!
                        CFRunLoopAddTimer(runLoop, timer, kCFRunLoopDefaultMode)
                        timers.append(timer)
                    }
                }
                for timer in timers { CFRunLoopTimerInvalidate(timer) }
                return cost
            }
        Report.add(
            ResultLine(
                scenario: "timers", metric: "schedule cost per timer, \(pending) pending", unit: "ns",
                ours: ours, comparisonName: theirs == nil ? nil : "CFRunLoopTimer", comparison: theirs,
                higherIsBetter: false))
        // The warm-up sample is left out, as `sample` leaves it out of `ours`. The kernel splits a
        // thread's CPU time into user and system time by ticks (4 ms here), so the user figure is
        // reported only where a sample lasts tens of milliseconds.
        if pending >= 100_000 {
            Report.add(
                ResultLine(
                    scenario: "timers", metric: "user CPU per timer scheduled, \(pending) pending", unit: "ns",
                    ours: Stats(Array(userCosts.dropFirst())), comparisonName: nil, comparison: nil,
                    higherIsBetter: false))
            Report.add(
                ResultLine(
                    scenario: "timers", metric: "system CPU per timer scheduled, \(pending) pending",
                    unit: "ns", ours: Stats(Array(systemCosts.dropFirst())), comparisonName: nil,
                    comparison: nil, higherIsBetter: false))
        }
        Report.add(
            ResultLine(
                scenario: "timers", metric: "page faults per 1000 timers scheduled, \(pending) pending",
                unit: "faults", ours: Stats(Array(faultCounts.dropFirst())), comparisonName: nil,
                comparison: nil, higherIsBetter: false))
    }

    /// The cost of adding a timer to a mode that already has `pending` timers: the mode is filled
    /// untimed, then 10,000 (1,000 with `--quick`) more are timed. Unlike `scheduleCost`, which
    /// averages the adds from 0 to `pending` and touches all of their memory for the first time
    /// in the sample, this isolates what the heap's size costs an add.
    private static func marginalScheduleCost(pending: Int, offsets: [Int64], scale: Scale) {
        let loop = Loop.current
        let added = scale.pick(10_000, quick: 1_000)
        let ours = sample(scale) {
            var timers: [LoopTimer] = []
            timers.reserveCapacity(pending + added)
            let base = ContinuousClock.now + .seconds(3_600)
            for index in 0..<pending {
                let timer = LoopTimer(fireAt: base + .nanoseconds(offsets[index % offsets.count])) { _ in }
                loop.add(timer, forMode: .default)
                timers.append(timer)
            }
            let cost = nanosecondsPerOperation(added) {
                for index in pending..<(pending + added) {
                    let timer = LoopTimer(fireAt: base + .nanoseconds(offsets[index % offsets.count])) { _ in }
                    loop.add(timer, forMode: .default)
                    timers.append(timer)
                }
            }
            for timer in timers { timer.invalidate() }
            loop.run(.default, for: .zero)
            return cost
        }
        Report.add(
            ResultLine(
                scenario: "timers", metric: "schedule cost per timer added to \(pending) pending", unit: "ns",
                ours: ours, comparisonName: nil, comparison: nil, higherIsBetter: false))
    }

    /// Resident memory per pending timer (a handler capturing nothing, so no closure context is
    /// allocated: the figure is the timer and the loop's bookkeeping), and how much of the growth
    /// is still resident after every timer was invalidated and the loop ran one pass.
    private static func memory(count: Int, offsets: [Int64], scale: Scale) {
        let loop = Loop.current
        var perTimer: [Double] = []
        var left: [Double] = []
        for _ in 0..<(scale.repetitions + 1) {
            loop.run(.default, for: .zero)
            // Free memory the allocator kept from earlier rounds would be reused without growing
            // the resident set, and hide what the timers cost.
            Loop.returnFreeMemory()
            let before = residentBytes()
            var timers: [LoopTimer] = []
            timers.reserveCapacity(count)
            let arrayBytes = residentBytes() - before  // the test's own array, not the loop's
            let base = ContinuousClock.now + .seconds(3_600)
            for offset in offsets.prefix(count) {
                let timer = LoopTimer(fireAt: base + .nanoseconds(offset)) { _ in }
                loop.add(timer, forMode: .default)
                timers.append(timer)
            }
            let pending = residentBytes()
            for timer in timers { timer.invalidate() }
            timers = []
            loop.run(.default, for: .zero)
            // The application's call after a teardown: the library never trims by itself.
            Loop.returnFreeMemory()
            let after = residentBytes()
            perTimer.append(Double(pending - before - arrayBytes) / Double(count))
            left.append(Double(after) / Double(before))
        }
        // The first round is the warm-up (the allocator settles its thresholds).
        Report.add(
            ResultLine(
                scenario: "timers", metric: "resident bytes per pending timer (\(count))", unit: "B",
                ours: Stats(Array(perTimer.dropFirst())), comparisonName: nil, comparison: nil,
                higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "timers", metric: "resident after \(count) invalidated / before", unit: "×",
                ours: Stats(Array(left.dropFirst())), comparisonName: nil, comparison: nil,
                higherIsBetter: false))
    }

    /// The process's resident set, from /proc/self/statm.
    private static func residentBytes() -> Int {
        guard let text = try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8) else { return 0 }
        let fields = text.split(separator: " ")
        return fields.count > 1 ? (Int(fields[1]) ?? 0) * Int(sysconf(Int32(_SC_PAGESIZE))) : 0
    }
}
