import CGLib
import CGLibBenchmarkSupport
import Dispatch
import Foundation
import LoopGLib
import LoopRuntime

// Issue #32's GLib figures, on the process's main thread, in one run:
//
// - `DispatchQueue.main.async` → handler → back, with `Loop.main` hosted in GLib's default context
//   under `g_main_loop_run` (what a GTK program's main queue costs), against the raw eventfd floor
//   (two threads handing a token over with eventfd and poll) and against `Loop.main` running itself;
// - a pass that does not wait (a block that queues the next), hosted in GLib against self-run;
// - `Loop.main` hosted in an idle `g_main_loop_run` for 3 s: GLib's polls, the loop's wake-ups and
//   the main thread's CPU time.
//
// Each figure is the median of `rounds` samples, the conditions interleaved round by round.
// `swift run -c release GLibBenchmarks` (from Integrations/GLib); `--quick` for a smoke run.

let quick = CommandLine.arguments.contains("--quick")
let rounds = quick ? 1 : 7
precondition(Loop.main.isCurrentThread, "GLibBenchmarks runs on the main thread")

/// One side of a token handed over through an eventfd.
final class Side: Sendable {
    let descriptor = cglib_bench_eventfd()
    func signal() { cglib_bench_eventfd_signal(descriptor) }
    func wait() { cglib_bench_eventfd_wait(descriptor) }
    deinit { close(descriptor) }
}

/// A `GMainLoop *`, handed to the helper thread that quits it (`g_main_loop_quit` is thread-safe).
struct GLibMainLoop: @unchecked Sendable {
    let pointer: OpaquePointer
    static func new() -> GLibMainLoop { GLibMainLoop(pointer: g_main_loop_new(nil, 0)) }
    func run() { g_main_loop_run(pointer) }
    func quit() { g_main_loop_quit(pointer) }
    func free() { g_main_loop_unref(pointer) }
}

func nanosecondsPerOperation(_ operations: Int, _ body: () -> Void) -> Double {
    let (seconds, attoseconds) = ContinuousClock().measure(body).components
    return (Double(seconds) * 1e9 + Double(attoseconds) / 1e9) / Double(operations)
}

func median(_ samples: [Double]) -> Double { samples.sorted()[samples.count / 2] }

/// How the main loop is run for a measurement.
enum Runner {
    case itself
    case glib

    /// Runs `Loop.main` until `finish` is called (from any thread).
    func run(_ body: (_ finish: @escaping @Sendable () -> Void) -> Void) {
        switch self {
        case .itself:
            body { DispatchQueue.main.async { Loop.main.stop() } }
            Loop.main.run(.default)
        case .glib:
            let hosting = try! GLibHostedLoop.hostMainLoop()
            let mainLoop = GLibMainLoop.new()
            body { mainLoop.quit() }
            mainLoop.run()
            mainLoop.free()
            precondition(!hosting.remove(), "the benchmark left work queued on the main loop")
        }
    }
}

/// The floor: a token bounced between this thread and a helper through two eventfds.
func floorRoundTrips(_ count: Int) {
    let here = Side()
    let there = Side()
    let helper = Thread {
        for _ in 0..<count {
            there.wait()
            here.signal()
        }
    }
    helper.start()
    for _ in 0..<count {
        there.signal()
        here.wait()
    }
    while !helper.isFinished { usleep(100) }
}

/// A helper thread posts to the main queue and waits for the block to signal it back.
func mainQueueRoundTrips(_ count: Int, _ runner: Runner) {
    let helper = Side()
    runner.run { finish in
        Thread {
            for _ in 0..<count {
                DispatchQueue.main.async { helper.signal() }
                helper.wait()
            }
            finish()
        }.start()
    }
}

/// A main-loop block that queues the next, `count` times: passes that never wait.
func chain(_ count: Int, _ runner: Runner) {
    final class Remaining: @unchecked Sendable {  // touched by the main loop's blocks only
        var value: Int
        init(_ value: Int) { self.value = value }
    }
    let remaining = Remaining(count)
    runner.run { finish in
        @Sendable func next() {
            Loop.main.perform {
                remaining.value -= 1
                if remaining.value == 0 { finish() } else { next() }
            }
        }
        next()
    }
}

func report(_ metric: String, _ unit: String, ours: Double, _ comparisons: [(String, Double)]) {
    var line = "glib | \(metric): \(String(format: "%.1f", ours)) \(unit)"
    for (name, value) in comparisons {
        line += " | \(name) \(String(format: "%.1f", value)) \(unit), ratio \(String(format: "%.2f", ours / value))×"
    }
    print(line)
}

print("GLib \(glibVersion); \(rounds) rounds, medians")

// GLib's polls are counted by a poll function that forwards to GLib's own: how many times GLib
// slept or looked, per round trip and over the idle span.
nonisolated(unsafe) var polls = 0  // main thread only: GLib polls on the thread that iterates its context
g_main_context_set_poll_func(nil) { fds, count, timeout in
    polls += 1
    return g_poll(fds, count, timeout)
}

let roundTrips = quick ? 500 : 20_000
var floorSamples: [Double] = []
var hostedSamples: [Double] = []
var itselfSamples: [Double] = []
var pollSamples: [Double] = []
for _ in 0..<rounds {
    floorSamples.append(nanosecondsPerOperation(roundTrips) { floorRoundTrips(roundTrips) })
    polls = 0
    hostedSamples.append(nanosecondsPerOperation(roundTrips) { mainQueueRoundTrips(roundTrips, .glib) })
    pollSamples.append(Double(polls) / Double(roundTrips))
    itselfSamples.append(nanosecondsPerOperation(roundTrips) { mainQueueRoundTrips(roundTrips, .itself) })
}
report(
    "DispatchQueue.main.async → handler → back, Loop.main hosted in g_main_loop_run", "ns/rt",
    ours: median(hostedSamples),
    [("eventfd floor", median(floorSamples)), ("Loop.main running itself", median(itselfSamples))])
// One is the least: GLib sleeps once per handed-over token (a second would be a wake-up of its own).
print("glib | GLib polls per round trip, hosted: \(String(format: "%.2f", median(pollSamples)))")

let blocks = quick ? 10_000 : 1_000_000
var hostedChain: [Double] = []
var itselfChain: [Double] = []
for _ in 0..<rounds {
    hostedChain.append(nanosecondsPerOperation(blocks) { chain(blocks, .glib) })
    itselfChain.append(nanosecondsPerOperation(blocks) { chain(blocks, .itself) })
}
report(
    "a pass that does not wait (block chain), Loop.main hosted in g_main_loop_run", "ns/pass",
    ours: median(hostedChain), [("Loop.main running itself", median(itselfChain))])

let seconds = quick ? 0.2 : 3.0
let settle = 0.1
let wakes = LoopWakeCounter()
let observer = LoopObserver(activities: .afterWaiting) { _, _ in wakes.increment() }
Loop.main.add(observer, forMode: .default)
// Main thread only: the GLib timeout below and the lines after the run.
nonisolated(unsafe) var cpu = 0.0
var loopWakes = 0
do {
    let hosting = try! GLibHostedLoop.hostMainLoop()
    let mainLoop = GLibMainLoop.new()
    Thread {
        Thread.sleep(forTimeInterval: settle + seconds)
        mainLoop.quit()
    }.start()
    // The measured span begins once the hosting settled (its first passes, the helper's start),
    // at a GLib timeout.
    g_timeout_add(
        UInt32(settle * 1000),
        { _ in
            polls = 0
            wakes.reset()
            cpu = -cglib_bench_thread_cpu_microseconds()
            return 0  // G_SOURCE_REMOVE
        }, nil)
    mainLoop.run()
    cpu += cglib_bench_thread_cpu_microseconds()
    loopWakes = wakes.value  // before remove(), whose end of the run is a pass of its own
    mainLoop.free()
    precondition(!hosting.remove(), "the benchmark left work queued on the main loop")
}
observer.invalidate()
g_main_context_set_poll_func(nil, nil)
// The quit from the helper thread wakes GLib once: that poll is not counted.
print(
    "glib | idle \(seconds) s, Loop.main hosted in g_main_loop_run: \(polls - 1) GLib wake-ups besides the quit, "
        + "\(loopWakes) loop wake-ups, \(String(format: "%.0f", cpu)) µs CPU")

/// The loop's wake-ups, counted by an observer on the main thread.
final class LoopWakeCounter: @unchecked Sendable {  // read and written on the main thread only
    private(set) var value = 0
    func increment() { value += 1 }
    func reset() { value = 0 }
}
