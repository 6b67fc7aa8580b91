import Foundation
import LoopRuntime

// LoopBenchmarks: every figure next to its comparison measured in the same run, as a ratio.
//
//   swift run -c release LoopBenchmarks [scenario…] [--quick] [--json] [--no-huge-pages]
//
// Ratios < 1 mean LoopRuntime is better (for rates, the ratio is comparison/ours).
//
// Scenarios run on a thread of their own (so that their loops are not the main loop, which
// services the main dispatch queue), except `main-queue`, which needs the main thread.

setvbuf(stdout, nil, _IOLBF, 0)  // line by line, so that CI logs show progress

// The executor-hooks scenario's children measure in a process of their own (the factory must be
// installed before anything touches Swift concurrency): they run nothing else.
if let flag = CommandLine.arguments.first(where: { $0.hasPrefix(ExecutorHooks.childFlag) }) {
    ExecutorHooks.child(
        String(flag.dropFirst(ExecutorHooks.childFlag.count)), Scale(quick: CommandLine.arguments.contains("--quick")))
}

let scenarios: [(name: String, onMainThread: Bool, run: (Scale) -> Void)] = [
    ("wake", false, WakePingPong.run),
    ("actor", false, ActorRoundTrip.run),
    ("task-executor", false, TaskExecutorFrames.run),
    ("async", false, AsyncTimers.run),
    ("empty-pass", false, EmptyPass.run),
    ("timers", false, TimerThroughput.run),
    ("timer-schedule", false, TimerThroughput.runSchedule),
    ("lateness", false, TimerLateness.run),
    ("idle", false, Idle.run),
    ("hosted", false, Hosted.run),
    ("instruments", false, Instruments.run),
    ("main-queue", true, MainQueue.run),
    ("executor-hooks", true, ExecutorHooks.run),
]

var arguments = Array(CommandLine.arguments.dropFirst())
let quick = arguments.contains("--quick")
Report.json = arguments.contains("--json")
arguments.removeAll { $0.hasPrefix("--") }
let unknown = arguments.filter { name in !scenarios.contains { $0.name == name } }
guard unknown.isEmpty else {
    print(
        "unknown scenario(s): \(unknown.joined(separator: ", ")); known: \(scenarios.map(\.name).joined(separator: ", "))"
    )
    exit(2)
}
let selected = arguments.isEmpty ? scenarios : scenarios.filter { arguments.contains($0.name) }
// Huge pages for big timer heaps are the application's opt-in (the library never asks by itself);
// the benchmark opts in, as a server scheduling millions of timers would, unless told not to
// (`--no-huge-pages`, the library's default).
Loop.largeTimerHeapsUseHugePages = !CommandLine.arguments.contains("--no-huge-pages")
let scale = Scale(quick: quick)
if !Report.json {
    print(
        "LoopBenchmarks — \(ProcessInfo.processInfo.activeProcessorCount) cores, \(scale.repetitions) repetitions after a warm-up; median [min–max]"
    )
}
for scenario in selected {
    if !Report.json { print("\n\(scenario.name)") }
    if scenario.onMainThread {
        scenario.run(scale)
    } else {
        let done = DispatchSemaphore(value: 0)
        let runner = Thread {
            scenario.run(scale)
            done.signal()
        }
        runner.stackSize = 8 << 20
        runner.start()
        done.wait()
    }
}
if Report.json { Report.printJSON() }
