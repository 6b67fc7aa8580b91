// ModeSwitching — two timers in two modes, and a loop switched between them from async code.
//
// Timer A lives in the default mode, timer B in "other". The loop thread's driver runs one mode at
// a time; `await loop.switchMode(to:)` leaves the current run and re-enters in the other mode (the
// immediate switch), and `withMode` scopes a switch.
//
//   swift run ModeSwitching

import LoopExecutor
import LoopRuntime

@main
struct Main {
    static func main() async throws {
        let other: Loop.Mode = "other"
        let thread = try LoopThread(name: "switching")
        let loop = thread.loop
        _ = start

        let timerA = LoopTimer(after: .milliseconds(30), interval: .milliseconds(30)) { _ in
            print("\(stamp())  timer A (default mode) fires in \(loop.currentMode!)")
        }
        let timerB = LoopTimer(after: .milliseconds(30), interval: .milliseconds(30)) { _ in
            print("\(stamp())  timer B (\(other) mode) fires in \(loop.currentMode!)")
        }
        loop.add(timerA, forMode: .default)
        loop.add(timerB, forMode: other)

        try await Task.sleep(for: .milliseconds(100))
        await loop.switchMode(to: other)
        print("\(stamp())  — switched to \(loop.currentMode!)")
        try await Task.sleep(for: .milliseconds(100))
        await loop.switchMode(to: .default)
        print("\(stamp())  — switched back to \(loop.currentMode!)")
        try await Task.sleep(for: .milliseconds(70))

        try await loop.withMode(other) {
            print("\(stamp())  — inside withMode(\(other)): \(loop.currentMode!)")
            try? await Task.sleep(for: .milliseconds(70))
        }
        print("\(stamp())  — withMode restored \(loop.currentMode!)")
        try await Task.sleep(for: .milliseconds(40))

        timerA.invalidate()
        timerB.invalidate()
        await thread.shutdown()
    }
}

let start = ContinuousClock.now

/// Milliseconds since the start, right-aligned.
func stamp() -> String {
    let elapsed = ContinuousClock.now - start
    let milliseconds = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
    return "\(milliseconds) ms".padding(7)
}

extension String {
    func padding(_ width: Int) -> String {
        String(repeating: " ", count: max(0, width - count)) + self
    }
}
