// MainLoop — the main thread belongs to the main loop, and async code still works: @MainActor
// view-model updates, a main-loop timer and DispatchQueue.main blocks interleave in the main
// loop's passes. During a "tracking" mode (outside the common set) main-queue work waits.
//
//   swift run MainLoop

import Dispatch
import LoopExecutor
import LoopRuntime

@MainActor
final class ViewModel {
    private(set) var title = "—"
    func update(_ title: String) {
        self.title = title
        print("  @MainActor   view model: \(title)")
    }
}

let start = ContinuousClock.now
func stamp() -> String {
    let elapsed = ContinuousClock.now - start
    let milliseconds = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
    let text = "\(milliseconds) ms"
    return String(repeating: " ", count: max(0, 7 - text.count)) + text
}

@main
struct App {
    static func main() throws {
        _ = start
        // A main-loop timer, in the common modes and in "tracking": it keeps firing while tracking.
        let clock = LoopTimer(after: .milliseconds(40), interval: .milliseconds(40)) { _ in
            print("\(stamp())  main-loop timer (\(Loop.main.currentMode!))")
        }
        Loop.main.add(clock, forMode: .common)
        Loop.main.add(clock, forMode: "tracking")

        // The body runs on the main actor, inside the main loop's passes.
        let finalTitle = try Loop.runMain {
            let model = ViewModel()
            model.update("loading")
            DispatchQueue.main.async { print("\(stamp())  DispatchQueue.main block") }
            try await Loop.main.sleep(for: .milliseconds(60))
            model.update("ready")
            try await followTheDrag(of: model)
            try await Loop.main.sleep(for: .milliseconds(30))
            return model.title
        }
        print("\(stamp())  final title: \(finalTitle)")
        clock.invalidate()
    }
}

/// "Tracking" is not a common mode: main-queue and @MainActor work wait until it ends. So this runs
/// off the main actor (`nonisolated`): code on the main actor could not run while the main loop is
/// in "tracking", and `withMode` traps rather than wait for ever if asked to from there.
nonisolated func followTheDrag(of model: ViewModel) async throws {
    try await Loop.main.withMode("tracking") {
        print("\(stamp())  tracking starts — main-queue work now waits")
        DispatchQueue.main.async { print("\(stamp())  DispatchQueue.main block (queued while tracking)") }
        Task { @MainActor in model.update("update queued while tracking") }
        try? await Task.sleep(for: .milliseconds(120))
        print("\(stamp())  tracking ends")
    }
}
