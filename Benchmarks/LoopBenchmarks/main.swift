import Foundation

// LoopBenchmarks: every figure next to its comparison measured in the same run, as a ratio.
//
//   swift run -c release LoopBenchmarks [scenario…] [--quick] [--json]
//
// Ratios < 1 mean LoopRuntime is better (for rates, the ratio is comparison/ours).

let scenarios: [(name: String, run: (Scale) -> Void)] = [
    ("wake", WakePingPong.run),
    ("actor", ActorRoundTrip.run),
    ("async", AsyncTimers.run),
    ("empty-pass", EmptyPass.run),
    ("timers", TimerThroughput.run),
    ("lateness", TimerLateness.run),
    ("idle", Idle.run),
]

setvbuf(stdout, nil, _IOLBF, 0)  // line by line, so that CI logs show progress
var arguments = Array(CommandLine.arguments.dropFirst())
let quick = arguments.contains("--quick")
Report.json = arguments.contains("--json")
arguments.removeAll { $0.hasPrefix("--") }
let unknown = arguments.filter { name in !scenarios.contains { $0.name == name } }
guard unknown.isEmpty else {
    print("unknown scenario(s): \(unknown.joined(separator: ", ")); known: \(scenarios.map(\.name).joined(separator: ", "))")
    exit(2)
}
let selected = arguments.isEmpty ? scenarios : scenarios.filter { arguments.contains($0.name) }
let scale = Scale(quick: quick)
if !Report.json {
    print("LoopBenchmarks — \(ProcessInfo.processInfo.activeProcessorCount) cores, \(scale.repetitions) repetitions after a warm-up; median [min–max]")
}
for scenario in selected {
    if !Report.json { print("\n\(scenario.name)") }
    scenario.run(scale)
}
if Report.json { Report.printJSON() }
