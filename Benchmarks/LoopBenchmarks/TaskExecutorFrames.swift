import Dispatch
import Foundation
import LoopExecutor
import LoopRuntime

/// A task that prefers a loop executor and calls nonisolated async functions (issue #35 item 1):
/// each iteration enters three levels of nonisolated async frames, each doing a little work of its
/// own after its call returns, so that every entry hop and every hop back is kept by the optimizer.
/// The same code runs on Swift's global pool (no preference), on a minimal `TaskExecutor`
/// written over `Loop.perform` (what any loop-backed task executor could do), and on the global
/// pool *as* the preferred task executor (what the runtime charges for a preference as such), in
/// the same run.
enum TaskExecutorFrames {
    static func run(_ scale: Scale) {
        let iterations = scale.pick(100_000, quick: 2_000)
        let thread = try! LoopThread(name: "bench-frames")
        let executor = thread.executor
        let onLoop = sample(scale) {
            nanosecondsPerOperation(iterations) {
                blocking { await withTaskExecutorPreference(executor) { await framesLoop(iterations) } }
            }
        }
        let onPool = sample(scale) {
            nanosecondsPerOperation(iterations) { blocking { await framesLoop(iterations) } }
        }
        let reference = PerformTaskExecutor(loop: thread.loop)
        let onReference = sample(scale) {
            nanosecondsPerOperation(iterations) {
                blocking { await withTaskExecutorPreference(reference) { await framesLoop(iterations) } }
            }
        }
        // The runtime's own pool as the preferred task executor: what any preference costs in
        // this runtime, whoever the executor is (the frames never leave the pool's threads).
        let onPreferredPool = sample(scale) {
            nanosecondsPerOperation(iterations) {
                blocking {
                    await withTaskExecutorPreference(globalConcurrentExecutor) { await framesLoop(iterations) }
                }
            }
        }
        // The same frames declared `nonisolated(nonsending)`: they run in the caller's isolation,
        // so there is no switch between them and no preference lookup — the remedy the docs give.
        let nonsendingOnLoop = sample(scale) {
            nanosecondsPerOperation(iterations) {
                blocking { await withTaskExecutorPreference(executor) { await nonsendingLoop(iterations) } }
            }
        }
        let nonsendingOnPool = sample(scale) {
            nanosecondsPerOperation(iterations) { blocking { await nonsendingLoop(iterations) } }
        }
        let metric = "3 nonisolated async frames, task preferring the loop"
        Report.add(
            ResultLine(
                scenario: "task-executor", metric: metric, unit: "ns/iteration", ours: onLoop,
                comparisonName: "global pool", comparison: onPool, higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "task-executor", metric: metric, unit: "ns/iteration", ours: onLoop,
                comparisonName: "TaskExecutor over Loop.perform", comparison: onReference, higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "task-executor", metric: metric, unit: "ns/iteration", ours: onLoop,
                comparisonName: "global pool as the preferred task executor", comparison: onPreferredPool,
                higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "task-executor", metric: "3 nonisolated(nonsending) async frames, task preferring the loop",
                unit: "ns/iteration", ours: nonsendingOnLoop, comparisonName: "global pool",
                comparison: nonsendingOnPool, higherIsBetter: false))
        // The frames stay on the loop's thread: checked once, outside the timing.
        blocking {
            await withTaskExecutorPreference(executor) {
                let stayed = await onLoopThread(thread.loop)
                precondition(stayed, "the frames left the loop's thread")
                let stayedNonsending = await nonsendingOnLoopThread(thread.loop)
                precondition(stayedNonsending, "the nonisolated(nonsending) frames left the loop's thread")
            }
        }
        thread.shutdown()
    }

    @inline(never)
    static func framesLoop(_ iterations: Int) async {
        var state = 1
        for index in 0..<iterations { state = step(await frame1(state &+ index)) }
        precondition(state != 42)
    }

    @inline(never)
    nonisolated static func frame1(_ value: Int) async -> Int {
        step(await frame2(step(value)))
    }

    @inline(never)
    nonisolated static func frame2(_ value: Int) async -> Int {
        step(await frame3(step(value)))
    }

    @inline(never)
    nonisolated static func frame3(_ value: Int) async -> Int {
        step(value)
    }

    @inline(never)
    static func nonsendingLoop(_ iterations: Int) async {
        var state = 1
        for index in 0..<iterations { state = step(await nonsendingFrame1(state &+ index)) }
        precondition(state != 42)
    }

    @inline(never)
    nonisolated(nonsending) static func nonsendingFrame1(_ value: Int) async -> Int {
        step(await nonsendingFrame2(step(value)))
    }

    @inline(never)
    nonisolated(nonsending) static func nonsendingFrame2(_ value: Int) async -> Int {
        step(await nonsendingFrame3(step(value)))
    }

    @inline(never)
    nonisolated(nonsending) static func nonsendingFrame3(_ value: Int) async -> Int {
        step(value)
    }

    @inline(never)
    nonisolated static func onLoopThread(_ loop: Loop) async -> Bool {
        step(1) == 0 ? false : loop.isCurrentThread
    }

    @inline(never)
    nonisolated(nonsending) static func nonsendingOnLoopThread(_ loop: Loop) async -> Bool {
        step(1) == 0 ? false : loop.isCurrentThread
    }

    /// A little work the optimizer cannot see through.
    @inline(never)
    static func step(_ value: Int) -> Int {
        value &* 0x9E37_79B9 &+ 7
    }
}

/// The reference: a `TaskExecutor` in a few lines over `Loop.perform`, each job a block that runs
/// it as this task executor.
final class PerformTaskExecutor: TaskExecutor, @unchecked Sendable {  // immutable after init
    let loop: Loop

    init(loop: Loop) {
        self.loop = loop
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        loop.perform { job.runSynchronously(on: executor) }
    }
}
