// TrackingMode — while the user drags, the loop runs a tracking mode: a default-mode timer pauses,
// a common-mode tick sequence keeps going. Written with the async API: ticks are awaited, the mode
// is switched with withMode.
//
//   swift run TrackingMode

import LoopExecutor
import LoopRuntime
import Synchronization

@main
struct Main {
    static func main() async throws {
        let tracking: Loop.Mode = "tracking"
        let thread = try LoopThread(name: "ui")
        let loop = thread.loop
        loop.addCommonMode(tracking)  // common ticks keep going while tracking

        // The "autosave" timer is default-mode only: it pauses while tracking.
        let autosaves = Atomic<Int>(0)
        let autosave = LoopTimer(after: .milliseconds(20), interval: .milliseconds(20)) { _ in
            autosaves.wrappingAdd(1, ordering: .relaxed)
        }
        loop.add(autosave, forMode: .default)

        // The "animation" ticks are common: they run in both modes.
        let animation = Task {
            var frames = 0
            for await tick in loop.ticks(every: .milliseconds(10), tolerance: .milliseconds(1)) {
                frames += 1
                if tick.missed > 0 { print("  animation dropped \(tick.missed) frame(s)") }
                if frames == 30 { break }
            }
            return frames
        }

        try await Task.sleep(for: .milliseconds(100))
        let beforeDrag = autosaves.load(ordering: .relaxed)
        print("before the drag: \(beforeDrag) autosaves")
        let endOfDrag = try await loop.withMode(tracking) {
            print("dragging (loop in \(loop.currentMode!))…")
            try? await Task.sleep(for: .milliseconds(120))
            return autosaves.load(ordering: .relaxed)
        }
        print("during the drag: \(endOfDrag - beforeDrag) autosave(s) (the timer was paused)")
        let frames = await animation.value
        print("the animation ticked \(frames) times, tracking or not")
        print(
            "after the drag: autosave resumed, firing once for the missed points (\(autosaves.load(ordering: .relaxed)) so far)"
        )
        autosave.invalidate()
        await thread.shutdown()
    }
}
