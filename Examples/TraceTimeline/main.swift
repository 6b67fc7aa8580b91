// TraceTimeline — record what two loops do and open it as a timeline.
//
//   swift run TraceTimeline trace.json
//
// Then open trace.json in https://ui.perfetto.dev (or chrome://tracing): one track per loop
// thread, with run calls, passes, waits, every callout under its label, executor batches, the
// tracking-mode run, and the deliberate 50 ms stall.

import LoopExecutor
import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// A renderer pinned to the UI loop, on an executor labelled so that its jobs are named.
actor Renderer: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    private var frames = 0

    init(loop: Loop) {
        loopExecutor = LoopExecutor(loop: loop, label: "renderer")
    }

    func render() -> Int {
        frames += 1
        spin(for: .microseconds(300))
        return frames
    }
}

@main
struct Main {
    static func main() async throws {
        let path = CommandLine.arguments.dropFirst().first ?? "trace.json"
        let tracking: Loop.Mode = "tracking"
        let ui = try LoopThread(name: "ui")
        let network = try LoopThread(name: "network")
        ui.loop.addCommonMode(tracking)
        for loop in [ui.loop, network.loop] {
            loop.startTracing()
            loop.startRecordingMetrics()
        }
        let stalls = Task {
            var reports: [Loop.Stall] = []
            for await stall in ui.loop.stalls(longerThan: .milliseconds(30)) { reports.append(stall) }
            return reports
        }

        // UI: an animation in every common mode, an autosave in the default mode only (it
        // pauses while tracking), and one layout pass that stalls the loop for 50 ms.
        let animation = LoopTimer(after: .milliseconds(10), interval: .milliseconds(10), label: "animation frame") {
            _ in spin(for: .microseconds(200))
        }
        ui.loop.add(animation, forMode: .common)
        let autosave = LoopTimer(after: .milliseconds(40), interval: .milliseconds(40), label: "autosave") { _ in
            spin(for: .milliseconds(2))
        }
        ui.loop.add(autosave, forMode: .default)
        ui.loop.add(
            LoopTimer(after: .milliseconds(150), label: "slow layout") { _ in spin(for: .milliseconds(50)) },
            forMode: .default)

        // Network: a poll timer whose responses are parsed on the UI loop.
        let networkLoop = network.loop
        let uiLoop = ui.loop
        let poll = LoopTimer(after: .milliseconds(15), interval: .milliseconds(25), label: "poll") { _ in
            spin(for: .microseconds(500))
            uiLoop.perform(label: "parse response") { spin(for: .milliseconds(1)) }
        }
        networkLoop.add(poll, forMode: .default)

        // The pinned actor renders from a task, 40 times.
        let renderer = Renderer(loop: ui.loop)
        for _ in 0..<20 {
            _ = await renderer.render()
            try await Task.sleep(for: .milliseconds(5))
        }
        // A drag: the UI loop runs the tracking mode for 100 ms (the autosave pauses).
        try await ui.loop.withMode(tracking) {
            for _ in 0..<20 {
                _ = await renderer.render()
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        try await Task.sleep(for: .milliseconds(100))

        for loop in [ui.loop, network.loop] { loop.stopTracing() }
        animation.invalidate()
        autosave.invalidate()
        poll.invalidate()
        let json = Loop.chromeTraceJSON(of: [ui.loop, network.loop])
        guard let file = fopen(path, "w") else {
            print("cannot write \(path): errno \(errno)")
            exit(1)
        }
        fputs(json, file)
        fclose(file)

        for loop in [ui.loop, network.loop] {
            let trace = loop.trace
            print("\(trace.loopName): \(trace.events.count) events (\(trace.dropped) dropped)")
            print(loop.metrics.description.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
        }
        await ui.shutdown()
        await network.shutdown()
        for stall in await stalls.value { print("stall: \(stall)") }
        print("wrote \(path): open it in https://ui.perfetto.dev or chrome://tracing")
    }
}

/// Busy-waits: work that keeps the loop's thread busy.
func spin(for duration: Duration) {
    let end = ContinuousClock.now + duration
    while ContinuousClock.now < end {}
}
