import Testing

@_spi(LoopExecutorSupport) @testable import LoopRuntime

/// The timer heap behind SPEC R35, R43 (an internal type, tested against a sorted model).
@Suite("TimerHeap")
struct TimerHeapTests {
    private func timer() -> LoopTimer { LoopTimer(fireAt: .now) { _ in } }

    private func entry(_ timer: LoopTimer, _ date: Int64, tolerance: Int64 = 0, sequence: UInt64) -> TimerHeap.Entry {
        timer.latestFireDate = date + tolerance
        return TimerHeap.Entry(fireDate: date, sequence: sequence, generation: timer.generation, timer: timer)
    }

    @Test(
        "R35 popDue yields live due entries in (date, sequence) order, in small and bulk batches",
        arguments: [10, 5_000, 50_000])
    func popDueOrder(count: Int) {
        var generator = SystemRandomNumberGenerator()
        var heap = TimerHeap()
        var model: [(date: Int64, sequence: UInt64, timer: LoopTimer)] = []
        for sequence in 1...UInt64(count) {
            let item = timer()
            let date = Int64.random(in: 0..<1_000, using: &generator)
            heap.push(entry(item, date, sequence: sequence))
            model.append((date, sequence, item))
        }
        // Make a third of them stale, as a moved or invalidated timer would be.
        for index in stride(from: 0, to: model.count, by: 3) {
            model[index].timer.generation &+= 1
            heap.noteStale()
        }
        let live = model.enumerated().filter { $0.offset % 3 != 0 }.map(\.element)
        let now: Int64 = 600
        var due: [TimerHeap.Entry] = []
        heap.popDue(asOf: now, into: &due)
        let expected = live.filter { $0.date <= now }.sorted { ($0.date, $0.sequence) < ($1.date, $1.sequence) }
        #expect(due.map(\.sequence) == expected.map(\.sequence))
        due.forEach(TimerHeap.release)

        // What is left is exactly the live, not-yet-due entries, earliest first.
        let rest = live.filter { $0.date > now }
        #expect(heap.earliestFireDate() == rest.map(\.date).min())
        var remaining: [TimerHeap.Entry] = []
        heap.popDue(asOf: .max, into: &remaining)
        #expect(
            remaining.map(\.sequence) == rest.sorted { ($0.date, $0.sequence) < ($1.date, $1.sequence) }.map(\.sequence)
        )
        remaining.forEach(TimerHeap.release)
        #expect(heap.liveCount == 0)
    }

    @Test("R43 the wake deadline is the earliest latest-fire time among live entries")
    func wakeDeadline() {
        var heap = TimerHeap()
        let a = timer()
        let b = timer()
        let c = timer()
        let stale = timer()
        heap.push(entry(a, 10, tolerance: 20, sequence: 1))  // [10, 30]
        heap.push(entry(b, 25, tolerance: 10, sequence: 2))  // [25, 35]
        heap.push(entry(c, 100, sequence: 3))
        heap.push(entry(stale, 5, sequence: 4))
        stale.generation &+= 1
        heap.noteStale()
        #expect(heap.wakeDeadline() == 30)
        #expect(heap.earliestFireDate() == 10)
        heap.removeAll().forEach(TimerHeap.release)
        #expect(heap.wakeDeadline() == LoopTime.distantFuture)
    }

    @Test("Entries keep their timers alive until released, and no longer")
    func ownership() {
        var heap = TimerHeap()
        weak var weakTimer: LoopTimer?
        do {
            let item = timer()
            weakTimer = item
            heap.push(entry(item, 1, sequence: 1))
        }
        #expect(weakTimer != nil)
        var due: [TimerHeap.Entry] = []
        heap.popDue(asOf: 5, into: &due)
        #expect(weakTimer != nil)
        due.forEach(TimerHeap.release)
        #expect(weakTimer == nil)
    }

    @Test("Compaction drops stale entries once they outnumber live ones")
    func compaction() {
        var heap = TimerHeap()
        let timers = (0..<100).map { _ in timer() }
        for (index, item) in timers.enumerated() { heap.push(entry(item, Int64(index), sequence: UInt64(index + 1))) }
        for item in timers.prefix(60) {
            item.generation &+= 1
            heap.noteStale()
        }
        #expect(heap.earliestFireDate() == 60)
        #expect(heap.entries.count == 40)
        #expect(heap.liveCount == 40)
        heap.removeAll().forEach(TimerHeap.release)
    }
}
