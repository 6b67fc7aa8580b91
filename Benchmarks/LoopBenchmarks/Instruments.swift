import Foundation
import LoopRuntime

/// Scenario `instruments`: what metrics and tracing cost a pass (issue #17). Each figure is
/// next to the same workload with every instrument off, measured interleaved in the same run
/// (off, metrics, tracing, off, …), so the ratios compare like with like.
enum Instruments {
    static func run(_ scale: Scale) {
        let calls = scale.pick(1_000_000, quick: 2_000)
        let loop = Loop.current
        let keepAlive = LoopSource {}
        loop.add(keepAlive, forMode: .default)

        // An empty run(for: .zero): entry, one pass, exit.
        measure(loop, scale, workload: "run(for: .zero)", calls: calls)

        // The same with one timer due at every pass: a repeating timer whose interval (1 ns) has
        // always passed by the next pass, so each call fires it once (SPEC R37).
        let timer = LoopTimer(fireAt: .now, interval: .nanoseconds(1), label: "every pass") { _ in }
        loop.add(timer, forMode: .default)
        measure(loop, scale, workload: "run(for: .zero) firing one timer", calls: calls)
        timer.invalidate()

        keepAlive.invalidate()
    }

    private static func measure(_ loop: Loop, _ scale: Scale, workload: String, calls: Int) {
        let body = { for _ in 0..<calls { loop.run(.default, for: .zero) } }
        var off: [Double] = []
        var metrics: [Double] = []
        var tracing: [Double] = []
        var eventsPerCall = 0.0
        for repetition in 0...scale.repetitions {
            let offSample = nanosecondsPerOperation(calls, body)
            loop.startRecordingMetrics()
            let metricsSample = nanosecondsPerOperation(calls, body)
            loop.stopRecordingMetrics()
            loop.startTracing(capacity: 1 << 16)
            let tracingSample = nanosecondsPerOperation(calls, body)
            loop.stopTracing()
            let trace = loop.trace
            eventsPerCall = Double(trace.events.count + trace.dropped) / Double(calls)
            if repetition > 0 {  // the first round warms up
                off.append(offSample)
                metrics.append(metricsSample)
                tracing.append(tracingSample)
            }
        }
        let offStats = Stats(off)
        Report.add(
            ResultLine(
                scenario: "instruments", metric: "\(workload), instruments off", unit: "ns", ours: offStats,
                comparisonName: nil, comparison: nil, higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "instruments", metric: "\(workload), metrics on", unit: "ns", ours: Stats(metrics),
                comparisonName: "instruments off", comparison: offStats, higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "instruments", metric: "\(workload), tracing on", unit: "ns", ours: Stats(tracing),
                comparisonName: "instruments off", comparison: offStats, higherIsBetter: false))
        // Each round's extra time over the off round of the same repetition, per recorded event.
        let perEvent = zip(tracing, off).map { ($0 - $1) / eventsPerCall }
        Report.add(
            ResultLine(
                scenario: "instruments", metric: "\(workload), cost per trace event (\(Int(eventsPerCall)) a call)",
                unit: "ns", ours: Stats(perEvent), comparisonName: nil, comparison: nil, higherIsBetter: false))
    }
}
