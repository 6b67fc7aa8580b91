// MainLoopChecks — the main loop's service of DispatchQueue.main and @MainActor (SPEC R56).
//
// These checks need the process's main thread, which the test runner keeps for itself, so they are
// an executable of their own. `swift test` runs it (MainLoopTests spawns it) and so does .ci/run.
// Each check prints its name; any failure exits with status 1.

import CLoopRuntimeShims
import Dispatch
import LoopExecutor
import LoopRuntime
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

nonisolated(unsafe) var failures = 0  // main thread only

func check(_ name: String, _ condition: Bool) {
    print((condition ? "ok   " : "FAIL ") + name)
    if !condition { failures += 1 }
}

let loop = Loop.main
precondition(loop.isCurrentThread, "MainLoopChecks must run on the main thread")

// Programmer errors that need the main thread: each must trap with its message (MainLoopTests
// runs these and checks the exit and the message).
switch CommandLine.arguments.dropFirst().first {
case "--with-mode-from-main-actor":
    // withMode to a mode outside the common set, from the main actor: it could never finish.
    _ = try? Loop.runMain { try await Loop.main.withMode("not-common") {} }
    exit(0)  // not reached
case "--run-main-from-a-task":
    // runMain from async code on the main thread: it cannot take the thread over.
    Task { @MainActor in _ = try? Loop.runMain { 0 } }
    _ = loop.run(.default, for: .seconds(10))  // the task runs in this run's drain of the main queue
    exit(0)  // not reached
case "--run-main-while-hosted":
    // Loop.runMain while a host runs the main loop: two drivers for one loop.
    let hosted = try! Loop.main.beginHosting()
    hosted.dispatch()
    _ = try? Loop.runMain { 0 }
    exit(0)  // not reached
default:
    break
}

// 1. A main-queue block runs while the main loop runs the default mode, and the drain counts as a
//    handled source.
let ran = Atomic<Int>(0)
DispatchQueue.main.async { ran.wrappingAdd(1, ordering: .relaxed) }
let first = loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true)
check("R56 a DispatchQueue.main block runs in a default-mode run", ran.load(ordering: .relaxed) == 1)
check("R56 draining the main queue is a handled source", first == .handledSource)

// 2. @MainActor work interleaves with the main loop's timers.
let trace = MainTrace()
let timer = LoopTimer(after: .milliseconds(5)) { _ in trace.append("timer") }
loop.add(timer, forMode: .default)
Task { @MainActor in trace.append("main-actor") }
_ = loop.run(.default, for: .milliseconds(50))
check("R56 @MainActor tasks and main-loop timers both run", Set(trace.all) == ["timer", "main-actor"])

// 3. A mode outside the common set does not drain the main queue; the default mode does.
let tracking: Loop.Mode = "tracking"
let keepAlive = LoopSource {}
loop.add(keepAlive, forMode: tracking)
let waited = Atomic<Bool>(false)
DispatchQueue.main.async { waited.store(true, ordering: .relaxed) }
_ = loop.run(tracking, for: .milliseconds(50))
check("R56 main-queue work waits while the main loop runs a non-common mode", !waited.load(ordering: .relaxed))
_ = loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true)
check("R56 … and runs once the loop is back in a common mode", waited.load(ordering: .relaxed))
keepAlive.invalidate()

// 4. An idle main loop does not spin on the main queue's descriptor: one wait, no CPU.
let waits = Atomic<Int>(0)
let counter = LoopObserver(activities: .beforeWaiting) { _, _ in waits.wrappingAdd(1, ordering: .relaxed) }
loop.add(counter, forMode: .default)
var cpuBefore = 0.0
var cpuAfter = 0.0
cloop_thread_cpu_microseconds(&cpuBefore)
let idle = loop.run(.default, for: .milliseconds(300))
cloop_thread_cpu_microseconds(&cpuAfter)
counter.invalidate()
check("R56 an idle main loop makes one wait (no spin)", idle == .timedOut && waits.load(ordering: .relaxed) == 1)
check("R56 an idle main loop uses (almost) no CPU: \(Int(cpuAfter - cpuBefore)) µs", cpuAfter - cpuBefore < 50_000)

// 5. Loop.runMain hands the main thread to the main loop while its main-actor body runs, and
//    returns the body's result. The mode switches run off the main actor: the main actor cannot
//    run while the main loop is in "tracking", which is not a common mode.
nonisolated func switchToTrackingAndBack() async -> Bool {
    await Loop.main.switchMode(to: tracking)
    let inTracking = Loop.main.currentMode == tracking
    await Loop.main.switchMode(to: .default)
    return inTracking
}
do {
    let result = try Loop.runMain {
        trace.append("run-main")
        try await Loop.main.sleep(for: .milliseconds(10))
        let inTracking = await switchToTrackingAndBack()
        trace.append(inTracking ? "switched" : "not-switched")
        return 42
    }
    check("Loop.runMain returns what its body returned", result == 42)
} catch {
    check("Loop.runMain did not throw", false)
}
check(
    "Loop.runMain runs async work, main-actor work and mode switches", trace.all.suffix(2) == ["run-main", "switched"])
struct Refusal: Error {}
do {
    try Loop.runMain { () throws -> Void in throw Refusal() }
    check("Loop.runMain rethrows what its body threw", false)
} catch {
    check("Loop.runMain rethrows what its body threw", error is Refusal)
}

// Issue #32: the main loop hosted by a poll(2) host (as GLib would host it): DispatchQueue.main
// blocks, @MainActor tasks, Loop.main.sleep and main-loop timers run in the hosted passes.
do {
    let hostedTrace = MainTrace()
    let hosted = try Loop.main.beginHosting()
    DispatchQueue.global().async { DispatchQueue.main.async { hostedTrace.append("queue") } }
    Task { @MainActor in
        hostedTrace.append("actor")
        try? await Loop.main.sleep(for: .milliseconds(10))
        hostedTrace.append("slept")
    }
    loop.add(LoopTimer(after: .milliseconds(5)) { _ in hostedTrace.append("timer") }, forMode: .default)
    let deadline = ContinuousClock.now + .seconds(20)
    var iterations = 0
    while hostedTrace.all.count < 4 && ContinuousClock.now < deadline {
        var fds = [pollfd(fd: hosted.descriptor, events: Int16(POLLIN), revents: 0)]
        let limit = hosted.prepare().timeoutMilliseconds
        _ = poll(&fds, 1, limit < 0 ? 1000 : min(limit, 1000))
        hosted.dispatch()
        iterations += 1
    }
    let leftOver = hosted.end()
    let seen = Set(hostedTrace.all)
    check("hosted main loop: a DispatchQueue.main block runs", seen.contains("queue"))
    check("hosted main loop: a @MainActor task runs and sleeps on a main-loop timer", seen.contains("slept"))
    check("hosted main loop: a main-loop timer fires", seen.contains("timer"))
    check("hosted main loop: the host slept between the events (\(iterations) iterations)", iterations < 100)
    check("hosted main loop: nothing was left queued at the end", !leftOver)
} catch {
    check("Loop.main.beginHosting() succeeded (\(error))", false)
}

print(failures == 0 ? "all main-loop checks passed" : "\(failures) main-loop check(s) failed")
exit(failures == 0 ? 0 : 1)

/// A log touched from the main thread only (main-queue blocks, main-loop callouts).
final class MainTrace: @unchecked Sendable {
    // Only the main thread touches `events`: timers of the main loop and main-queue work run there.
    private var events: [String] = []
    func append(_ event: String) { events.append(event) }
    var all: [String] { events }
}
