import Dispatch
import LoopExecutor
import Synchronization
import Testing

@testable import LoopRuntime

/// Busy-waits on the calling thread: a stand-in for work that blocks the loop.
private func blockThread(for duration: Duration) {
    let end = ContinuousClock.now + duration
    while ContinuousClock.now < end {}
}

/// An actor on a labelled executor of its own.
private actor Indexer {
    nonisolated let unownedExecutor: UnownedSerialExecutor
    let executor: LoopExecutor
    private var indexed = 0

    init(executor: LoopExecutor) {
        self.executor = executor
        unownedExecutor = executor.asUnownedSerialExecutor()
    }

    func nap() async throws {
        try await executor.loop.sleep(for: .milliseconds(1))
    }

    func index() -> Int {
        indexed += 1
        return indexed
    }
}

@Suite("Observability: stall streams, executor labels, job metrics", .timeLimit(.minutes(3)))
struct ObservabilityTests {
    @Test("stalls(longerThan:) reports the labelled block that blocked the loop, and ends at shutdown")
    func stallStreamNamesTheCulprit() async throws {
        let thread = try LoopThread(name: "stalling")
        let stalls = thread.loop.stalls(longerThan: .milliseconds(30))
        let collector = Task {
            var reports: [Loop.Stall] = []
            for await stall in stalls { reports.append(stall) }
            return reports
        }
        // The stream's handler is registered when the stream is made.
        #expect(thread.loop.instrumentFlags.load(ordering: .relaxed) & InstrumentFlags.stalls != 0)
        try thread.perform(label: "quick") { blockThread(for: .milliseconds(1)) }
        try thread.perform(label: "blocking") { blockThread(for: .milliseconds(60)) }
        try thread.perform(waitUntilDone: true) {}
        await thread.shutdown()

        let reports = await collector.value
        #expect(reports.count == 1)
        #expect(reports.first?.label.map { "\($0)" } == "blocking")
        #expect(reports.first?.culprit == .block)
        #expect(reports.first?.scope == .callout)
        #expect((reports.first?.duration ?? .zero) >= .milliseconds(60))
        #expect(reports.first?.mode == .default)
        // The stream removed its handler when it ended.
        #expect(thread.loop.instruments.stallThreshold.load(ordering: .relaxed) == .max)
    }

    @Test("A stall stream keeps for its first next() a stall that happened after it was made (issue #36)")
    func stallBeforeTheFirstNext() async throws {
        let thread = try LoopThread(name: "stall-before-next")
        let stalls = thread.loop.stalls(longerThan: .milliseconds(30))
        try thread.perform(waitUntilDone: true, label: "early") { blockThread(for: .milliseconds(60)) }
        var iterator = stalls.makeAsyncIterator()
        let report = await iterator.next()
        #expect(report?.label.map { "\($0)" } == "early")
        await thread.shutdown()
        #expect(await iterator.next() == nil)
    }

    @Test("A stall stream that is never iterated removes its handler when its last copy goes away")
    func unusedStallStreamLeaves() throws {
        let thread = try LoopThread(name: "unused stalls")
        defer { thread.shutdown() }
        func makeAndDrop() {
            let stalls = thread.loop.stalls(longerThan: .seconds(10))
            #expect(thread.loop.instrumentFlags.load(ordering: .relaxed) & InstrumentFlags.stalls != 0)
            _ = stalls
        }
        makeAndDrop()
        #expect(thread.loop.instrumentFlags.load(ordering: .relaxed) & InstrumentFlags.stalls == 0)
    }

    @Test("a cancelled stall stream removes its handler from the loop")
    func cancelledStallStreamLeaves() async throws {
        let thread = try LoopThread(name: "cancelled stalls")
        defer { Task { await thread.shutdown() } }
        let task = Task {
            for await _ in thread.loop.stalls(longerThan: .seconds(10)) {}
        }
        #expect(await eventually { thread.loop.instrumentFlags.load(ordering: .relaxed) & InstrumentFlags.stalls != 0 })
        task.cancel()
        await task.value
        #expect(await eventually { thread.loop.instrumentFlags.load(ordering: .relaxed) & InstrumentFlags.stalls == 0 })
    }

    @Test("a labelled executor's jobs are job callouts with its label; job latency is recorded")
    func labelledExecutorJobsInMetricsAndTrace() async throws {
        let thread = try LoopThread(name: "indexing")
        let loop = thread.loop
        loop.startRecordingMetrics()
        loop.startTracing()
        let indexer = Indexer(executor: LoopExecutor(loop: loop, label: "indexer"))
        #expect(indexer.executor.label.map { "\($0)" } == "indexer")
        var last = 0
        for _ in 0..<20 { last = await indexer.index() }
        #expect(last == 20)
        try thread.perform(waitUntilDone: true) {}
        loop.stopTracing()
        let metrics = loop.metrics
        #expect(metrics[.job].count >= 20)
        #expect(metrics.jobLatency.count >= 20)
        #expect(metrics.jobLatency.max > .zero)
        let events = loop.trace.events
        let jobs = events.filter { if case .callout(.job) = $0.kind { true } else { false } }
        #expect(jobs.count >= 20)
        #expect(jobs.allSatisfy { $0.name == "indexer" })
        let batches = events.filter { if case .jobBatch = $0.kind { true } else { false } }
        #expect(!batches.isEmpty && batches.allSatisfy { $0.name == "jobs indexer" })
        await thread.shutdown()
    }

    @Test("The package's own blocks carry names in traces: a waiting task's wake-up, submit (issue #36)")
    func packageBlocksAreLabelled() async throws {
        let thread = try LoopThread(name: "labelled blocks")
        let loop = thread.loop
        loop.startTracing()
        try await Indexer(executor: loop.executor).nap()  // woken by a block on the loop
        #expect(try await loop.submit { 1 } == 1)
        #expect(try await loop.submit(inModes: [.default]) { 2 } == 2)
        #expect(try await thread.submit { 3 } == 3)
        try thread.perform(waitUntilDone: true) {}
        loop.stopTracing()
        let blocks = loop.trace.events.filter { if case .callout(.block) = $0.kind { true } else { false } }
        let names = Set(blocks.compactMap(\.name))
        #expect(names.isSuperset(of: ["wake-up of a waiting task", "Loop.submit", "LoopThread.submit"]), "\(names)")
        await thread.shutdown()
    }

    @Test("instruments turned on and off from other threads while the loop works: no imbalance, no race")
    func togglingInstrumentsWhileTheLoopWorks() async throws {
        let thread = try LoopThread(name: "toggled")
        let loop = thread.loop
        let ticks = LoopTimer(after: .zero, interval: .microseconds(200), label: "tick") { _ in }
        loop.add(ticks, forMode: .common)
        let rounds = 300
        let blocks = Task.detached {
            for _ in 0..<rounds * 4 { try? thread.perform(label: "block") {} }
        }
        let toggler = Task.detached {
            for round in 0..<rounds {
                switch round % 4 {
                case 0: loop.startRecordingMetrics()
                case 1: loop.startTracing(capacity: 64)
                case 2: loop.stopRecordingMetrics()
                default: loop.stopTracing()
                }
                _ = loop.metrics.passes
                _ = loop.trace.events.count
            }
        }
        let streams = Task.detached {
            for _ in 0..<rounds / 10 {
                let watcher = Task { for await _ in loop.stalls(longerThan: .seconds(10)) {} }
                try? await Task.sleep(for: .microseconds(100))
                watcher.cancel()
                await watcher.value
            }
        }
        await blocks.value
        await toggler.value
        await streams.value
        loop.stopRecordingMetrics()
        loop.stopTracing()
        try thread.perform(waitUntilDone: true) {
            // A resident loop's run call and at most its pass are open: nothing piled up.
            #expect(loop.instruments.runs.count <= 1)
            #expect(loop.instruments.callouts.count <= 1)  // this very block, if it is recorded
        }
        #expect(await eventually { loop.instrumentFlags.load(ordering: .relaxed) == 0 })
        #expect(loop.metrics.passes > 0)
        ticks.invalidate()
        await thread.shutdown()
    }
}
