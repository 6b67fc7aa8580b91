// LoopDemo — LoopRuntime in one minute: an actor pinned to a loop thread, awaited ticks of a loop
// timer, the loop's activity as an async stream, and a mode switch from async code.
//
//   swift run LoopDemo

import LoopExecutor
import LoopRuntime

/// An actor whose jobs run on the loop thread, inside the loop's passes.
actor Counter: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    private var count = 0
    init(thread: LoopThread) { loopExecutor = thread.executor }

    func increment() -> Int {
        precondition(loopExecutor.loop.isCurrentThread)  // always the loop's thread
        count += 1
        return count
    }
}

@main
struct LoopDemo {
    static func main() async throws {
        let thread = try LoopThread(name: "demo")
        let loop = thread.loop

        // 1. Stream the loop's activity: how long each pass ran, from waking to sleeping again.
        let trace = Task {
            var passes = 0
            for await event in loop.activities([.afterWaiting, .beforeWaiting, .entry]) {
                if event.activity == .entry { print("  [activity] the loop entered \(event.mode)") }
                if event.activity == .afterWaiting { passes += 1 }
            }
            return passes
        }

        // 2. An actor pinned to the loop thread, called from this task.
        let counter = Counter(thread: thread)
        print("counter → \(await counter.increment()), \(await counter.increment())")

        // 3. Await ticks of a loop timer (mode-aware, with tolerance; no backlog if we are slow).
        var ticks = 0
        for await tick in loop.ticks(every: .milliseconds(20), tolerance: .milliseconds(2)) {
            ticks += 1
            print("tick \(ticks) (missed \(tick.missed)); counter → \(await counter.increment())")
            if ticks == 3 { break }
        }

        // 4. Switch the loop's mode from async code: default-mode timers pause meanwhile, while
        //    common-mode work (our actors, in "tracking" too once it is common) keeps running.
        loop.addCommonMode("tracking")
        let saves = Counter(thread: thread)
        let autosave = LoopTimer(after: .milliseconds(5), interval: .milliseconds(5)) { _ in
            Task { await _ = saves.increment() }
        }
        loop.add(autosave, forMode: .default)
        try await loop.withMode("tracking") {
            let before = await saves.increment()
            try await Task.sleep(for: .milliseconds(50))
            print(
                "in \(loop.currentMode!): the default-mode timer paused (\(await saves.increment() - before - 1) saves)"
            )
        }
        try await Task.sleep(for: .milliseconds(20))
        print("back in \(loop.currentMode!): saves resumed (\(await saves.increment()) so far)")
        autosave.invalidate()

        await thread.shutdown()  // runs what was queued, ends the activity stream, joins the thread
        print("the loop made \(await trace.value) passes after waiting")
    }
}
