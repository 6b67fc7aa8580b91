// DelayedPerform — the image-loading case: work performed "after a delay in the default mode"
// waits while the loop runs a tracking mode (the user is scrolling), and runs as soon as the loop
// is back in the default mode.
//
//   swift run DelayedPerform

import LoopRuntime

let tracking: Loop.Mode = "tracking"
let loop = Loop.current
let start = ContinuousClock.now
func now() -> String {
    let elapsed = ContinuousClock.now - start
    return "\(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000) ms"
}

// "Load the images" 50 ms from now, but only in the default mode (SPEC R75).
loop.perform(after: .milliseconds(50), inModes: [.default]) {
    print("\(now()): images loaded (default mode)")
}

// The user starts scrolling at once: the loop runs the tracking mode for 200 ms. A common-mode
// timer keeps the scrolling smooth meanwhile.
loop.addCommonMode(tracking)
let scroll = LoopTimer(after: .milliseconds(40), interval: .milliseconds(40)) { _ in
    print("\(now()): scrolling… (\(Loop.current.currentMode!))")
}
loop.add(scroll, forMode: .common)
print("\(now()): scrolling starts")
loop.run(tracking, for: .milliseconds(200))
print("\(now()): scrolling ends; the deferred work runs now")
scroll.invalidate()
loop.run(.default, for: .milliseconds(100))
