import LoopExecutor
import LoopRuntime
import LoopTesting
import Testing

// The two worked examples of the article "Testing code that uses loops" (LoopTesting.docc), with
// the public API only. Keep them in step with the article.

// MARK: - A debounced search

/// Searches for what the user typed once they have stopped typing for `delay`.
actor SearchBox: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    private let delay: Duration
    private(set) var queries: [String] = []
    private var pending: Task<Void, Never>?

    init(executor: LoopExecutor, delay: Duration = .milliseconds(300)) {
        loopExecutor = executor
        self.delay = delay
    }

    func type(_ text: String) {
        pending?.cancel()  // removes the earlier sleep's timer from the loop at once
        pending = Task {
            do {
                try await loopExecutor.loop.sleep(for: delay)
            } catch {
                return  // cancelled: a later keystroke took over
            }
            queries.append(text)
        }
    }
}

@Suite("Worked example: a debounced search", .timeLimit(.minutes(3)))
struct DebouncedSearchTests {
    @Test("Only the last text of a burst is searched, `delay` after the last keystroke")
    func searchesOnceTypingStops() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let search = SearchBox(executor: loop.executor)

        await search.type("s")
        try await loop.advance(by: .milliseconds(200))
        await search.type("sw")
        try await loop.advance(by: .milliseconds(200))
        await search.type("swi")
        try await loop.advance(by: .milliseconds(299))
        #expect(await search.queries == [])

        try await loop.advance(by: .milliseconds(1))
        #expect(await search.queries == ["swi"])
        #expect(loop.loop.timerCount(forMode: .common) == 0)  // no sleep is left behind
    }

    @Test("Two bursts apart are two searches")
    func twoBursts() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        let search = SearchBox(executor: loop.executor)
        await search.type("a")
        try await loop.advance(by: .seconds(1))
        await search.type("ab")
        try await loop.advance(by: .seconds(1))
        #expect(await search.queries == ["a", "ab"])
    }
}

// MARK: - An autosave that pauses during a drag

/// Saves the document every `interval` while it has unsaved edits. Its ticks are in the default
/// mode only, so they pause while the loop runs the tracking mode (a drag in progress) and resume
/// after it, once for all the points the drag skipped.
actor Autosave: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    private let interval: Duration
    private var dirty = false
    /// When each save happened, on the loop's clock, and how many ticks it stood for.
    private(set) var saves: [(at: ContinuousClock.Instant, missed: Int)] = []
    private var ticking: Task<Void, Never>?

    init(executor: LoopExecutor, interval: Duration = .seconds(2)) {
        loopExecutor = executor
        self.interval = interval
    }

    func start() {
        ticking = Task {
            for await tick in loopExecutor.loop.ticks(every: interval, inModes: [.default]) where dirty {
                dirty = false
                saves.append((tick.date, tick.missed))
            }
        }
    }

    func edit() { dirty = true }

    func stop() { ticking?.cancel() }
}

@Suite("Worked example: an autosave that pauses during a drag", .timeLimit(.minutes(3)))
struct AutosaveTests {
    @Test("Saves on its grid while dirty, pauses during a drag, catches up once after it")
    func pausesDuringADrag() async throws {
        let loop = try TestLoop(stallTimeout: busyMachineStallTimeout)
        // The editor's actors run during a drag: the tracking mode is common. The autosave's ticks
        // are in the default mode alone.
        loop.loop.addCommonMode("tracking")
        let start = loop.now
        let autosave = Autosave(executor: loop.executor)
        await autosave.start()

        await autosave.edit()
        try await loop.advance(by: .seconds(2))
        #expect(await autosave.saves.map { start.duration(to: $0.at) } == [.seconds(2)])

        try await loop.advance(by: .seconds(2))  // nothing to save at 4 s
        #expect(await autosave.saves.count == 1)

        await autosave.edit()
        #expect(await loop.loop.switchMode(to: "tracking"))  // the drag begins at 4 s
        try await loop.advance(by: .seconds(5))  // the points at 6 s and 8 s pass during the drag
        #expect(await autosave.saves.count == 1)

        #expect(await loop.loop.switchMode(to: .default))  // the drag ends at 9 s
        try await loop.runUntilIdle()
        let saves = await autosave.saves
        #expect(saves.count == 2)
        #expect(saves.last.map { start.duration(to: $0.at) } == .seconds(6))  // the tick due at 6 s,
        #expect(saves.last?.missed == 1)  // standing for 8 s too
        await autosave.stop()
    }
}
