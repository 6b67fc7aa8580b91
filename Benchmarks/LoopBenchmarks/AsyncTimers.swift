import Dispatch
import Foundation
import LoopExecutor
import LoopRuntime

/// Issue #5's figures: lateness of many concurrent loop sleeps, and the loop-thread cost of the
/// activity stream.
enum AsyncTimers {
    static func run(_ scale: Scale) {
        let sleepers = scale.pick(10_000, quick: 500)
        let thread = try! LoopThread(name: "bench-sleep")
        let loop = thread.loop
        // Each figure is the median [min–max] over the rounds: one multi-millisecond stall (this
        // machine's hypervisor steals whole ticks) decides a round's p99, so a single round says
        // little (BENCHMARKS.md, sixth session of issue #14).
        var loopRounds: [(p50: Double, p99: Double)] = []
        var taskRounds: [(p50: Double, p99: Double)] = []
        var pooledRounds: [(p50: Double, p99: Double)] = []
        for _ in 0..<(scale.quick ? 1 : 5) {
            // Sleepers whose tasks run on the loop itself: the wake-up is the loop's work alone.
            loopRounds.append(
                lateness(sleepers, on: thread.executor) { deadline in try? await loop.sleep(until: deadline) })
            // The same sleeps from tasks on the global pool, and Task.sleep there: both include
            // resuming 10,000 tasks through the pool's two threads.
            pooledRounds.append(lateness(sleepers, on: nil) { deadline in try? await loop.sleep(until: deadline) })
            taskRounds.append(
                lateness(sleepers, on: nil) { deadline in try? await Task.sleep(until: deadline, clock: .continuous) })
        }
        let loopStats = (p50: Stats(loopRounds.map(\.p50)), p99: Stats(loopRounds.map(\.p99)))
        let pooledStats = (p50: Stats(pooledRounds.map(\.p50)), p99: Stats(pooledRounds.map(\.p99)))
        let taskStats = (p50: Stats(taskRounds.map(\.p50)), p99: Stats(taskRounds.map(\.p99)))
        precondition(loop.timerCount(forMode: .common) == 0, "timers left behind")
        Report.add(
            ResultLine(
                scenario: "async", metric: "\(sleepers) sleeps, tasks on the loop: p50 lateness", unit: "µs",
                ours: loopStats.p50, comparisonName: nil, comparison: nil, higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "async", metric: "\(sleepers) sleeps, tasks on the loop: p99 lateness", unit: "µs",
                ours: loopStats.p99, comparisonName: nil, comparison: nil, higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "async", metric: "\(sleepers) sleeps, pool tasks: p50 lateness", unit: "µs",
                ours: pooledStats.p50, comparisonName: "Task.sleep", comparison: taskStats.p50,
                higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "async", metric: "\(sleepers) sleeps, pool tasks: p99 lateness", unit: "µs",
                ours: pooledStats.p99, comparisonName: "Task.sleep", comparison: taskStats.p99,
                higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "async", metric: "timers left on the loop after the sleeps", unit: "",
                ours: Stats([Double(loop.timerCount(forMode: .common))]), comparisonName: nil, comparison: nil,
                higherIsBetter: false))
        thread.shutdown()

        activityCost(scale)
    }

    /// Every sleeper sleeps until its own deadline (spread over 200 ms, starting 300 ms from now,
    /// no tolerance) and records how late it woke, in microseconds. A sleeper that only started
    /// after its deadline (the pool was still starting the others) is left out: the figure is
    /// about the timers, not about task start-up.
    static func lateness(
        _ count: Int, on executor: LoopExecutor?,
        _ sleep: @escaping @Sendable (ContinuousClock.Instant) async -> Void
    ) -> (p50: Double, p99: Double) {
        let results = LatenessResults(count)
        blocking {
            let base = ContinuousClock.now + .milliseconds(300)
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<count {
                    let deadline = base + .microseconds(Int64(index * 200_000 / count))
                    group.addTask(executorPreference: executor) {
                        let started = ContinuousClock.now
                        await sleep(deadline)
                        results.record(index, started < deadline ? ContinuousClock.now - deadline : nil)
                    }
                }
            }
        }
        return results.percentiles()
    }

    /// The loop thread's cost per delivered activity event: zero-timeout runs (E BT BS X) with and
    /// without a stream attached.
    static func activityCost(_ scale: Scale) {
        let loop = Loop.current
        let keepAlive = LoopSource {}
        loop.add(keepAlive, forMode: .default)
        defer { keepAlive.invalidate() }
        let runs = scale.pick(200_000, quick: 2_000)
        let without = sample(scale) {
            nanosecondsPerOperation(runs) { for _ in 0..<runs { loop.run(.default, for: .zero) } }
        }
        let iterator = loop.activities(buffering: .dropOldest(capacity: 1024)).makeAsyncIterator()
        let with = sample(scale) {
            nanosecondsPerOperation(runs) { for _ in 0..<runs { loop.run(.default, for: .zero) } }
        }
        withExtendedLifetime(iterator) {}  // the stream (and its observer) lived until here
        let perEvent = Stats([(with.median - without.median) / 4])
        Report.add(
            ResultLine(
                scenario: "async", metric: "activity stream, loop-thread cost per event", unit: "ns",
                ours: perEvent, comparisonName: nil, comparison: nil, higherIsBetter: false))
    }
}

final class LatenessResults: @unchecked Sendable {
    // Each index is written by one task; read after all tasks finished.
    private var values: [Double]
    init(_ count: Int) { values = Array(repeating: -1, count: count) }
    func record(_ index: Int, _ lateness: Duration?) {
        guard let lateness else { return }
        let (seconds, attoseconds) = lateness.components
        values[index] = Double(seconds) * 1e6 + Double(attoseconds) / 1e12
    }
    func percentiles() -> (p50: Double, p99: Double) {
        let values = self.values.filter { $0 >= 0 }
        if getenv("LOOP_BENCH_DEBUG") != nil {
            let worst = values.enumerated().sorted { $0.element > $1.element }.prefix(15)
            print("worst:", worst.map { "\($0.offset):\(Int($0.element))" }.joined(separator: " "))
        }
        let sorted = values.sorted()
        return (sorted[sorted.count / 2], sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
    }
}
