// StallDetector — a hang monitor that names the culprit: `loop.stalls(longerThan:)` reports every
// callout (or pass) that kept the loop's thread busy longer than a threshold, with the label of
// the timer, source, block or executor that ran long. The loop measures on its own thread and
// hands each report over without blocking; the monitor is an ordinary task.
//
//   swift run StallDetector

import LoopExecutor
import LoopRuntime

@main
struct Main {
    static func main() async throws {
        let threshold = Duration.milliseconds(50)
        let thread = try LoopThread(name: "watched")
        let loop = thread.loop

        let monitor = Task {
            var stalls: [Loop.Stall] = []
            for await stall in loop.stalls(longerThan: threshold) {
                if stall.dropped > 0 { print("  (monitor fell behind: \(stall.dropped) reports dropped)") }
                print("  stall: \(stall)")
                stalls.append(stall)
            }
            return stalls
        }
        // Let the monitor start iterating (it registers its handler then) before the work starts.
        try await Task.sleep(for: .milliseconds(20))

        // Some quick work, a timer that stalls once, a blocking block, and a pass of many short
        // blocks that add up to a stall (reported as the pass, naming its longest block).
        for index in 0..<5 {
            try thread.perform(label: "quick sum") { _ = (0..<1000).reduce(index, &+) }
        }
        loop.add(
            LoopTimer(after: .milliseconds(10), label: "refresh cache") { _ in blockFor(.milliseconds(120)) },
            forMode: .default)
        try await Task.sleep(for: .milliseconds(200))
        try thread.perform(label: "parse config") { blockFor(.milliseconds(80)) }
        try await Task.sleep(for: .milliseconds(150))
        for _ in 0..<4 {
            try thread.perform(label: "small step") { blockFor(.milliseconds(15)) }
        }
        try await Task.sleep(for: .milliseconds(200))

        await thread.shutdown()  // ends the stall stream
        let stalls = await monitor.value
        print("detected \(stalls.count) stall(s) longer than \(threshold)")
    }
}

/// Busy-waits: a stand-in for work that blocks the loop thread.
func blockFor(_ duration: Duration) {
    let end = ContinuousClock.now + duration
    while ContinuousClock.now < end {}
}
