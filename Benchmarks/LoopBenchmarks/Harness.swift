import CBenchmarkSupport
import Foundation

/// How big the workloads are: `--quick` (CI smoke) or the real sizes.
struct Scale {
    let quick: Bool
    /// `real` normally, `quick` under `--quick`.
    func pick(_ real: Int, quick small: Int) -> Int { quick ? small : real }
    var repetitions: Int { quick ? 2 : 7 }
}

/// Median, min and max of repeated measurements (one value per repetition).
struct Stats {
    let median: Double
    let min: Double
    let max: Double

    init(_ samples: [Double]) {
        let sorted = samples.sorted()
        median = sorted[sorted.count / 2]
        min = sorted.first!
        max = sorted.last!
    }
}

/// Runs `body` once to warm up and then `repetitions` times; each run returns its own figure.
func sample(_ scale: Scale, _ body: () -> Double) -> Stats {
    _ = body()
    return Stats((0..<scale.repetitions).map { _ in body() })
}

/// Nanoseconds per operation of `operations` operations done by `body`.
func nanosecondsPerOperation(_ operations: Int, _ body: () -> Void) -> Double {
    let elapsed = ContinuousClock().measure(body)
    let (seconds, attoseconds) = elapsed.components
    return (Double(seconds) * 1e9 + Double(attoseconds) / 1e9) / Double(operations)
}

/// The calling thread's user and system CPU time and minor page faults so far (`getrusage`).
struct ThreadSplit {
    var userMicroseconds = 0.0
    var systemMicroseconds = 0.0
    var minorFaults = 0.0

    static func now() -> ThreadSplit {
        var split = ThreadSplit()
        cbench_thread_split(&split.userMicroseconds, &split.systemMicroseconds, &split.minorFaults)
        return split
    }
}

/// One result line: our figure, the comparison measured in the same run, and the ratio.
struct ResultLine {
    let scenario: String
    let metric: String
    let unit: String
    let ours: Stats
    let comparisonName: String?
    let comparison: Stats?
    /// For rates (higher is better) the ratio is inverted so that < 1 always means "we are better".
    let higherIsBetter: Bool

    var ratio: Double? {
        guard let comparison else { return nil }
        return higherIsBetter ? comparison.median / ours.median : ours.median / comparison.median
    }
}

enum Report {
    nonisolated(unsafe) static var lines: [ResultLine] = []
    nonisolated(unsafe) static var json = false

    static func add(_ line: ResultLine) {
        lines.append(line)
        guard !json else { return }
        func format(_ stats: Stats) -> String {
            "\(fmt(stats.median)) \(line.unit) [\(fmt(stats.min))–\(fmt(stats.max))]"
        }
        var text =
            "  \(line.metric.padding(toLength: max(44, line.metric.count), withPad: " ", startingAt: 0)) LoopRuntime \(format(line.ours))"
        if let name = line.comparisonName, let comparison = line.comparison, let ratio = line.ratio {
            text += "   \(name) \(format(comparison))   ratio \(String(format: "%.2f", ratio))×"
        }
        print(text)
    }

    static func fmt(_ value: Double) -> String {
        if value >= 100 { return String(format: "%.0f", value) }
        if value >= 10 { return String(format: "%.1f", value) }
        return String(format: "%.2f", value)
    }

    static func printJSON() {
        let entries = lines.map { line -> String in
            var fields = [
                "\"scenario\": \"\(line.scenario)\"", "\"metric\": \"\(line.metric)\"",
                "\"unit\": \"\(line.unit)\"", "\"median\": \(line.ours.median)",
                "\"min\": \(line.ours.min)", "\"max\": \(line.ours.max)",
            ]
            if let name = line.comparisonName, let comparison = line.comparison, let ratio = line.ratio {
                fields += [
                    "\"comparison\": \"\(name)\"", "\"comparisonMedian\": \(comparison.median)",
                    "\"ratio\": \(ratio)",
                ]
            }
            return "  {" + fields.joined(separator: ", ") + "}"
        }
        print("[\n" + entries.joined(separator: ",\n") + "\n]")
    }
}
