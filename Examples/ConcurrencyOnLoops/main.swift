// ConcurrencyOnLoops — a whole program's Swift concurrency on loops: the main actor in the main
// loop, the default executor on loop threads, Task.sleep on loop timers.
//
// Needs the package trait that adopts Swift's experimental executor SPI:
//
//     swift run --traits ExperimentalExecutorHooks ConcurrencyOnLoops
//
// It shows, in order:
//   1. @MainActor updates ("UI" work) interleaving with a main-loop timer, in one pass order;
//   2. Task.sleep landing on loop timers (the loop counts them while the task sleeps);
//   3. a mode switch of the main loop pausing main-actor work until the loop is back;
//   4. detached tasks and a task group running on the default executor's loop threads.

#if ExperimentalExecutorHooks && compiler(>=6.3)
    import LoopExecutor
    import LoopRuntime

    /// A stand-in for a UI: main-actor state, changed only on the main thread.
    @MainActor final class Screen {
        private let start = ContinuousClock.now
        func show(_ line: String) {
            let tenths = Int((ContinuousClock.now - start) / .microseconds(100))
            let time = "\(tenths / 10).\(tenths % 10) ms"
            print(String(repeating: " ", count: max(0, 9 - time.count)) + time + "  " + line)
        }
    }

    /// The index of the default executor's loop thread running the caller, if any.
    func groupThread() -> String {
        let threads = LoopGroupExecutor.standard.group.threads
        guard let index = threads.firstIndex(where: { $0.loop.isCurrentThread }) else { return "not a loop thread" }
        return "default-executor-\(index)"
    }

    /// Off the main actor: the main actor cannot run while the main loop is in "tracking".
    nonisolated func dragFor(_ duration: Duration, screen: Screen) async throws {
        _ = await Loop.main.switchMode(to: "tracking")
        print("             main loop in 'tracking': main-actor work waits")
        Task { @MainActor in screen.show("main-actor update queued during the drag: runs after it") }
        try await Task.sleep(for: duration)
        print("             drag over")
        _ = await Loop.main.switchMode(to: .default)
    }

    try LoopExecutorFactory.runMain {
        let screen = Screen()

        print("1. @MainActor updates and a main-loop timer, interleaved")
        let ticker = LoopTimer(after: .milliseconds(25), interval: .milliseconds(25)) { _ in
            MainActor.assumeIsolated { screen.show("main-loop timer tick") }
        }
        Loop.main.add(ticker, forMode: .common)
        for step in 1...3 {
            screen.show("main-actor update \(step)")
            try await Task.sleep(for: .milliseconds(40))
        }
        ticker.invalidate()

        print("2. Task.sleep is a loop timer")
        let sleeper = Task.detached {
            try await Task.sleep(for: .milliseconds(100))
            return groupThread()
        }
        try await Task.sleep(for: .milliseconds(20))
        let sleeping = LoopGroupExecutor.standard.delayedJobCount
        screen.show("sleeps waiting in the default executor's loop timers: \(sleeping)")
        screen.show("the sleeper woke on \(try await sleeper.value)")

        print("3. a mode switch pauses main-actor work")
        try await dragFor(.milliseconds(60), screen: screen)
        try await Task.sleep(for: .milliseconds(5))

        print("4. detached tasks run on the default executor's loops")
        let places = await withTaskGroup(of: String.self) { group in
            for _ in 0..<4 { group.addTask { groupThread() } }
            var places: [String] = []
            for await place in group { places.append(place) }
            return places.sorted()
        }
        screen.show("task-group children ran on: \(places.joined(separator: ", "))")
    }
    print("done")
#else
    print(
        "ConcurrencyOnLoops needs the ExperimentalExecutorHooks trait: swift run --traits ExperimentalExecutorHooks ConcurrencyOnLoops"
    )
#endif
