// StallDetector — a hang monitor built on the activity stream: measure every pass from the moment
// the loop wakes (afterWaiting) to the moment it goes back to sleep (beforeWaiting) and report the
// passes longer than a threshold. The observer callout only buffers; the analysis is async.
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
            var stalls: [Duration] = []
            var awake: ContinuousClock.Instant?
            for await event in loop.activities([.afterWaiting, .beforeWaiting]) {
                if event.dropped > 0 { print("  (monitor fell behind: \(event.dropped) events dropped)") }
                switch event.activity {
                case .afterWaiting:
                    awake = event.time
                case .beforeWaiting:
                    if let start = awake, event.time - start > threshold {
                        let length = event.time - start
                        print("  stall: a pass took \(length) in \(event.mode)")
                        stalls.append(length)
                    }
                    awake = nil
                default:
                    break
                }
            }
            return stalls
        }

        // Some quick work, then two blocking jobs that stall the loop.
        for index in 0..<5 {
            try thread.perform { _ = (0..<1000).reduce(index, &+) }
        }
        try thread.perform { blockFor(.milliseconds(120)) }
        try await Task.sleep(for: .milliseconds(200))
        try thread.perform { blockFor(.milliseconds(80)) }
        try await Task.sleep(for: .milliseconds(200))

        await thread.shutdown()  // ends the activity stream
        let stalls = await monitor.value
        print("detected \(stalls.count) stall(s) longer than \(threshold)")
    }
}

/// Busy-waits: a stand-in for work that blocks the loop thread.
func blockFor(_ duration: Duration) {
    let end = ContinuousClock.now + duration
    while ContinuousClock.now < end {}
}
