import CBenchmarkSupport
import CoreFoundation
import Foundation
import LoopRuntime

/// Scenario 8: an idle loop must cost nothing — no CPU time and no wake-ups.
enum Idle {
    struct Usage {
        var cpuMicroseconds = 0.0
        var contextSwitches = 0.0
    }

    /// CPU time and context switches of the calling thread while `body` runs.
    static func threadUsage(_ body: () -> Void) -> Usage {
        var before = Usage()
        var after = Usage()
        cbench_thread_usage(&before.cpuMicroseconds, &before.contextSwitches)
        body()
        cbench_thread_usage(&after.cpuMicroseconds, &after.contextSwitches)
        return Usage(
            cpuMicroseconds: after.cpuMicroseconds - before.cpuMicroseconds,
            contextSwitches: after.contextSwitches - before.contextSwitches)
    }

    /// Results written by the measuring thread, read after it signalled `done`.
    final class Results: @unchecked Sendable {
        var ours = Usage()
        var theirs = Usage()
        let done = DispatchSemaphore(value: 0)
    }

    static func run(_ scale: Scale) {
        let seconds = scale.quick ? 0.2 : 5.0
        let results = Results()
        // A fresh thread, so that its CPU time is the loop's alone.
        Thread {
            let loop = Loop.current
            let keepAlive = LoopSource {}
            loop.add(keepAlive, forMode: .default)
            results.ours = threadUsage { loop.run(.default, for: .milliseconds(Int64(seconds * 1000))) }
            keepAlive.invalidate()

            var context = CFRunLoopSourceContext()
            context.perform = { _ in }
            let source = CFRunLoopSourceCreate(nil, 0, &context)
            CFRunLoopAddSource(CFRunLoopGetCurrent(), source, kCFRunLoopDefaultMode)
            results.theirs = threadUsage { _ = CFRunLoopRunInMode(kCFRunLoopDefaultMode, seconds, false) }
            CFRunLoopSourceInvalidate(source)
            results.done.signal()
        }.start()
        results.done.wait()
        let label = "idle \(seconds) s"
        // The comparison is floored at 1 so that a ratio exists when both are 0.
        Report.add(
            ResultLine(
                scenario: "idle", metric: "\(label): CPU time of the loop thread", unit: "µs",
                ours: Stats([results.ours.cpuMicroseconds]), comparisonName: "CFRunLoop",
                comparison: Stats([max(results.theirs.cpuMicroseconds, 1)]), higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "idle", metric: "\(label): context switches (wake-ups)", unit: "",
                ours: Stats([results.ours.contextSwitches]), comparisonName: "CFRunLoop",
                comparison: Stats([max(results.theirs.contextSwitches, 1)]), higherIsBetter: false))
    }
}
