import Dispatch
import Foundation
import LoopExecutor
import LoopRuntime
import Synchronization

/// Issue #13's speed figures: the same workloads in two processes run back to back, one on the
/// stock executors and one with `LoopExecutorFactory` installed (main actor on the main loop,
/// default executor on one loop thread per core). Needs the ExperimentalExecutorHooks trait:
/// `swift run -c release --traits ExperimentalExecutorHooks LoopBenchmarks executor-hooks`.
enum ExecutorHooks {
    static let childFlag = "--executor-hooks-child="

    static func run(_ scale: Scale) {
        #if ExperimentalExecutorHooks && compiler(>=6.3)
            let stock = runChild("stock", scale)
            let factory = runChild("factory", scale)
            for (metric, ours) in factory.sorted(by: { $0.key < $1.key }) {
                guard let comparison = stock[metric] else { continue }
                Report.add(
                    ResultLine(
                        scenario: "executor-hooks", metric: metric.name, unit: metric.unit, ours: ours,
                        comparisonName: "stock executors", comparison: comparison,
                        higherIsBetter: metric.unit == "calls/s"))
            }
        #else
            if !Report.json {
                print("  (skipped: build with --traits ExperimentalExecutorHooks to measure the executor factory)")
            }
        #endif
    }

    struct Metric: Hashable, Comparable {
        let name: String
        let unit: String
        static func < (a: Metric, b: Metric) -> Bool { a.name < b.name }
    }

    /// Runs this executable as a child measuring on `executors`; returns its figures.
    private static func runChild(_ executors: String, _ scale: Scale) -> [Metric: Stats] {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: CommandLine.arguments[0])
        process.arguments = [childFlag + executors] + (scale.quick ? ["--quick"] : [])
        let output = Pipe()
        process.standardOutput = output
        try! process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        precondition(process.terminationStatus == 0, "the \(executors) child failed")
        var figures: [Metric: Stats] = [:]
        for line in String(decoding: data, as: UTF8.self).split(separator: "\n") {
            let fields = line.split(separator: "|").map(String.init)
            guard fields.count == 5, let median = Double(fields[2]), let low = Double(fields[3]),
                let high = Double(fields[4])
            else { continue }
            figures[Metric(name: fields[0], unit: fields[1])] = Stats([low, median, high])
        }
        return figures
    }

    /// The child: installs the factory first if asked (before anything touches Swift
    /// concurrency), measures, prints `metric|unit|median|min|max` lines, and exits.
    static func child(_ executors: String, _ scale: Scale) -> Never {
        #if ExperimentalExecutorHooks && compiler(>=6.3)
            if executors == "factory" { precondition(LoopExecutorFactory.install()) }
        #endif
        func emit(_ name: String, _ unit: String, _ stats: Stats) {
            print("\(name)|\(unit)|\(stats.median)|\(stats.min)|\(stats.max)")
        }
        if getenv("LOOP_BENCH_SLEEP_ONLY") != nil {  // for profiling the sleepers alone
            for _ in 0..<20 {
                let lateness = sleepLateness(10_000)
                print("p50 \(lateness[lateness.count / 2]) µs, p99 \(lateness[lateness.count * 99 / 100]) µs")
            }
            exit(0)
        }
        if getenv("LOOP_BENCH_GROUP_SLEEP_ONLY") != nil {  // … the sleepers in one task group
            for _ in 0..<20 {
                let lateness = groupSleepLateness(10_000)
                print("p50 \(lateness[lateness.count / 2]) µs, p99 \(lateness[lateness.count * 99 / 100]) µs")
            }
            exit(0)
        }
        if getenv("LOOP_BENCH_CHILDREN_ONLY") != nil {  // … the trivial task-group children
            for _ in 0..<20 { print("\(nanosecondsPerOperation(1) { blockingTaskGroup(100_000) } / 1e6) ms") }
            exit(0)
        }
        let roundTrips = scale.pick(100_000, quick: 2_000)
        let plain = DefaultCounter()
        emit(
            "task → default actor → back", "ns/rt",
            sample(scale) { nanosecondsPerOperation(roundTrips) { blockingRoundTrips(plain, roundTrips) } })
        let thread = try! LoopThread(name: "bench-hooks")
        let pinned = Counter(executor: thread.executor)
        emit(
            "task → loop-pinned actor → back", "ns/rt",
            sample(scale) { nanosecondsPerOperation(roundTrips) { blockingRoundTrips(pinned, roundTrips) } })
        let perTask = scale.pick(100_000, quick: 2_000)
        emit(
            "4 tasks × \(perTask) awaits on one default actor", "calls/s",
            sample(scale) {
                1e9 / nanosecondsPerOperation(4 * perTask) { blockingParallelCalls(plain, tasks: 4, perTask: perTask) }
            })
        let sleepers = scale.pick(10_000, quick: 200)
        var p50: [Double] = []
        var p99: [Double] = []
        for _ in 0..<(scale.repetitions + 1) {
            let lateness = sleepLateness(sleepers)
            p50.append(lateness[lateness.count / 2])
            p99.append(lateness[lateness.count * 99 / 100])
        }
        emit("Task.sleep lateness p50, \(sleepers) sleepers", "µs", Stats(Array(p50.dropFirst())))
        emit("Task.sleep lateness p99, \(sleepers) sleepers", "µs", Stats(Array(p99.dropFirst())))
        // Issue #34's rows: the same sleeps as children of one task group (the runtime's child list
        // is part of what is measured), and a group of trivial children.
        p50 = []
        p99 = []
        for _ in 0..<(scale.repetitions + 1) {
            let lateness = groupSleepLateness(sleepers)
            p50.append(lateness[lateness.count / 2])
            p99.append(lateness[lateness.count * 99 / 100])
        }
        emit("Task.sleep lateness p50, \(sleepers) sleepers in one task group", "µs", Stats(Array(p50.dropFirst())))
        emit("Task.sleep lateness p99, \(sleepers) sleepers in one task group", "µs", Stats(Array(p99.dropFirst())))
        let children = scale.pick(100_000, quick: 2_000)
        emit(
            "\(children) trivial task-group children", "ms",
            sample(scale) { nanosecondsPerOperation(1) { blockingTaskGroup(children) } / 1e6 })
        thread.shutdown()
        exit(0)
    }

    /// `count` tasks each sleep 1–50 ms (a fixed spread); returns each one's lateness in µs, sorted.
    /// Unstructured tasks and a countdown, not a task group: a group of 10,000 children spends its
    /// time in the runtime's child-list removal (quadratic when they end out of order), which would
    /// measure the group, not the sleeps.
    private static func sleepLateness(_ count: Int) -> [Double] {
        let results = LatenessLog(count: count)
        let remaining = Atomic<Int>(count)
        let done = DispatchSemaphore(value: 0)
        for index in 0..<count {
            Task.detached {
                let delay = Duration.microseconds(1_000 + (index &* 7_919) % 49_000)
                let deadline = ContinuousClock.now + delay
                try? await Task.sleep(until: deadline, clock: .continuous)
                results.set(index, Double((ContinuousClock.now - deadline) / .nanoseconds(1)) / 1_000)
                if remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { done.signal() }
            }
        }
        done.wait()
        return results.sorted()
    }
}

/// `count` children of one task group each sleep 1–50 ms (the spread of `sleepLateness`); returns
/// each one's lateness in µs, sorted.
private func groupSleepLateness(_ count: Int) -> [Double] {
    let results = LatenessLog(count: count)
    blocking {
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<count {
                group.addTask {
                    let delay = Duration.microseconds(1_000 + (index &* 7_919) % 49_000)
                    let deadline = ContinuousClock.now + delay
                    try? await Task.sleep(until: deadline, clock: .continuous)
                    results.set(index, Double((ContinuousClock.now - deadline) / .nanoseconds(1)) / 1_000)
                }
            }
        }
    }
    return results.sorted()
}

/// A task group of `count` children that each add to a counter, awaited to the end.
private func blockingTaskGroup(_ count: Int) {
    blocking {
        let sum = await withTaskGroup(of: Int.self, returning: Int.self) { group in
            for index in 0..<count { group.addTask { index & 1 } }
            var sum = 0
            for await value in group { sum &+= value }
            return sum
        }
        precondition(sum == count / 2)
    }
}

/// One slot per sleeper, each written once by its own task; read after all finished.
final class LatenessLog: @unchecked Sendable {
    // Each index is written by exactly one task, and read only after the task group ended.
    private let slots: UnsafeMutableBufferPointer<Double>
    init(count: Int) { slots = .allocate(capacity: count) }
    deinit { slots.deallocate() }
    func set(_ index: Int, _ value: Double) { slots[index] = value }
    func sorted() -> [Double] { Array(slots).sorted() }
}
