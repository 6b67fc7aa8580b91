// BackgroundTimer — "how do I run a repeating timer on a background thread?": give the thread a
// loop (a LoopThread), add the timer to that loop, and stop it cleanly.
//
//   swift run BackgroundTimer

import Dispatch
import LoopRuntime

let worker = try LoopThread(name: "timer-thread")
let start = ContinuousClock.now
let ticks = DispatchSemaphore(value: 0)

// The timer fires on the worker's thread, every 50 ms; tolerance lets the loop coalesce wake-ups.
let timer = LoopTimer(after: .milliseconds(50), interval: .milliseconds(50), tolerance: .milliseconds(5)) { timer in
    let elapsed = ContinuousClock.now - start
    print("  tick on \(worker.loop.isCurrentThread ? "the worker thread" : "?!") at \(elapsed)")
    ticks.signal()
}
worker.loop.add(timer, forMode: .default)

// Meanwhile this thread does something else; then it waits for five ticks.
for _ in 0..<5 { ticks.wait() }

// Stopping cleanly: invalidate the timer (safe from any thread), then shut the thread down.
timer.invalidate()
worker.shutdown()
print("timer valid: \(timer.isValid), worker running: \(worker.isOpen)")
