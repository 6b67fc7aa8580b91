// ExitAndReentry — the engine in one thread, and a mode switch by leaving the run and re-entering.
//
// A default-mode timer and a common-mode timer tick while the loop runs the default mode. The
// loop then leaves and re-enters in a "tracking" mode (the classic "user is scrolling" mode):
// the default-mode timer pauses, the common-mode timer keeps going. An observer prints each run's
// entry and exit and how long the loop slept.
//
//   swift run ExitAndReentry

import LoopRuntime

let tracking: Loop.Mode = "tracking"
let loop = Loop.current
let start = ContinuousClock.now

func stamp() -> String {
    let elapsed = ContinuousClock.now - start
    let milliseconds = elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000
    let text = String(milliseconds)
    return String(repeating: " ", count: max(0, 5 - text.count)) + text + " ms"
}

// "tracking" joins the common set, so items added to .common run in it too (SPEC R62).
loop.addCommonMode(tracking)

// An observer of the common modes: entry, exit, and the waits between passes.
let observer = LoopObserver(activities: [.entry, .exit, .beforeWaiting]) { _, activity in
    let mode = Loop.current.currentMode?.rawValue ?? "?"
    switch activity {
    case .entry: print("\(stamp())  ▶ enter \(mode)")
    case .exit: print("\(stamp())  ◀ exit \(mode)")
    default: print("\(stamp())      … \(mode): nothing to do, sleeping until the next timer")
    }
}
loop.add(observer, forMode: .common)

// A default-mode timer: it only fires while the loop runs .default (SPEC R34).
let defaultTimer = LoopTimer(after: .milliseconds(100), interval: .milliseconds(100)) { _ in
    print("\(stamp())    default-mode timer")
}
loop.add(defaultTimer, forMode: .default)

// A common-mode timer: it fires in every common mode, tracking included.
let commonTimer = LoopTimer(after: .milliseconds(150), interval: .milliseconds(150), tolerance: .milliseconds(10)) {
    _ in
    print("\(stamp())    common-mode timer")
}
loop.add(commonTimer, forMode: .common)

// Switch modes by leaving the run and re-entering in another mode.
for (mode, milliseconds) in [(Loop.Mode.default, 350), (tracking, 350), (.default, 250)] {
    let result = loop.run(mode, for: .milliseconds(milliseconds))
    print("\(stamp())  run(\(mode)) returned .\(result)\n")
}

// Work sent from another thread wakes the sleeping loop by itself (SPEC M2).
let sender = Task.detached {
    try? await Task.sleep(for: .milliseconds(50))
    loop.perform(inModes: [.default]) {
        print("\(stamp())    block from another thread — stopping the loop")
        loop.stop()
    }
}
let result = loop.run(.default, for: .seconds(5))
print("\(stamp())  run(default) returned .\(result)")
_ = sender
defaultTimer.invalidate()
commonTimer.invalidate()
