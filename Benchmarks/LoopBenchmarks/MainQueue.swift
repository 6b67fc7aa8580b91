import CLoopRuntimeShims
import Dispatch
import Foundation
import LoopRuntime

/// Issue #8's figures, on the process's main thread: `DispatchQueue.main.async` into a sleeping
/// main loop, and draining a million main-queue blocks, against Foundation's `RunLoop.main`.
enum MainQueue {
    static func run(_ scale: Scale) {
        precondition(Loop.main.isCurrentThread, "the main-queue scenario needs the main thread")
        let roundTrips = scale.pick(20_000, quick: 500)
        let floor = sample(scale) { nanosecondsPerOperation(roundTrips) { RawPingPong.run(roundTrips) } }
        let ours = sample(scale) { nanosecondsPerOperation(roundTrips) { pingPong(roundTrips) } }
        Report.add(
            ResultLine(
                scenario: "main-queue", metric: "DispatchQueue.main.async → sleeping main loop → back", unit: "ns/rt",
                ours: ours, comparisonName: "floor", comparison: floor, higherIsBetter: false))

        let blocks = scale.pick(1_000_000, quick: 10_000)
        let oursRate = sample(scale) {
            1e9
                / nanosecondsPerOperation(blocks) {
                    drain(blocks) { Loop.main.run(.default, for: .seconds(1), returnAfterSourceHandled: true) }
                }
        }
        let foundationRate = sample(scale) {
            1e9
                / nanosecondsPerOperation(blocks) {
                    drain(blocks) { _ = RunLoop.main.run(mode: .default, before: Date(timeIntervalSinceNow: 1)) }
                }
        }
        Report.add(
            ResultLine(
                scenario: "main-queue", metric: "\(blocks) main-queue blocks drained", unit: "blocks/s",
                ours: oursRate, comparisonName: "RunLoop.main", comparison: foundationRate, higherIsBetter: true))
    }

    /// A helper thread posts to the main queue; the block, run by the sleeping main loop, signals
    /// the helper back through its eventfd.
    static func pingPong(_ count: Int) {
        let helper = RawPingPong.Side()
        let finished = DispatchSemaphore(value: 0)
        Thread {
            for _ in 0..<count {
                DispatchQueue.main.async { helper.signal() }
                helper.wait()
            }
            DispatchQueue.main.async { Loop.main.stop() }
            finished.signal()
        }.start()
        Loop.main.run(.default)
        finished.wait()
    }

    /// Posts `count` blocks to the main queue, then runs the main loop with `run` until they ran.
    static func drain(_ count: Int, _ run: () -> Void) {
        let counter = PassCounter()
        for _ in 0..<count { DispatchQueue.main.async { counter.value += 1 } }
        while counter.value < count { run() }
    }
}
