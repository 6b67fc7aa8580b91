import Testing

@testable import LoopRuntime

/// The timer heap behind SPEC R35, R43 (an internal type, tested against a sorted model).
@Suite("TimerHeap", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct TimerHeapTests {
    private func timer() -> LoopTimer { LoopTimer(fireAt: .now) { _ in } }

    /// An entry as the loop makes one: the timer carries its add order and tolerance (an entry
    /// reads both from it), the entry its date and the timer's current generation.
    private func entry(_ timer: LoopTimer, _ date: Int64, tolerance: Int64 = 0, sequence: UInt64) -> TimerHeap.Entry {
        timer.sequence = sequence
        timer.tolerance = .nanoseconds(tolerance)
        return TimerHeap.Entry(fireDate: date, generation: timer.generation, timer: timer)
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
        heap.takeGraveyard().forEach(TimerHeap.release)  // the stale ones' retains (no leak)
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

    @Test("Random pushes, moves, invalidations and pops keep every heap invariant, and give every retain back")
    func randomMutationsKeepInvariants() {
        var generator = SystemRandomNumberGenerator()
        var heap = TimerHeap()
        let timers = (0..<200).map { _ in timer() }
        var live: [Int: TimerHeap.Entry] = [:]  // the model: each timer's live entry
        for step in 0..<5_000 {
            let index = Int.random(in: 0..<timers.count, using: &generator)
            let item = timers[index]
            switch Int.random(in: 0..<4, using: &generator) {
            case 0, 1:  // push, or move: the old entry goes stale, a new one is pushed
                if live[index] != nil {
                    item.generation &+= 1
                    heap.noteStale()
                }
                // A timer's add order is fixed once it is bound; only its date and generation move.
                let fresh = entry(item, Int64.random(in: 0..<10_000, using: &generator), sequence: UInt64(index + 1))
                heap.push(fresh)
                live[index] = fresh
            case 2:  // invalidate
                if live.removeValue(forKey: index) != nil {
                    item.generation &+= 1
                    heap.noteStale()
                }
            default:  // pop what is due at a random time, as a pass does
                var due: [TimerHeap.Entry] = []
                heap.popDue(asOf: Int64.random(in: 0..<2_000, using: &generator), into: &due)
                for popped in due {
                    let owner = live.first { $0.value.timer === popped.timer }
                    #expect(
                        owner.map { ($0.value.fireDate, $0.value.generation) } ?? (-1, 0)
                            == (popped.fireDate, popped.generation),
                        "step \(step): popped a stale entry")
                    if let owner { live.removeValue(forKey: owner.key) }
                    TimerHeap.release(popped)
                }
            }
            heap.checkInvariants()
            #expect(heap.liveCount == live.count, "step \(step)")
        }
        heap.removeAll().forEach(TimerHeap.release)
        for entry in heap.takeGraveyard() { TimerHeap.release(entry) }
        // Every retain the heap took is given back: each timer has the retain count of one that
        // never met a heap.
        let untouched = [timer()]
        let baseline = untouched.map { _getRetainCount($0) }[0]
        let counts = timers.map { _getRetainCount($0) }
        #expect(counts.allSatisfy { $0 == baseline }, "retain counts \(Set(counts)), baseline \(baseline)")
    }

    @Test("the entry buffer keeps its entries while it grows into a huge-page mapping and shrinks back")
    func entryBufferAcrossTheMappingThreshold() {
        let shared = timer()
        let buffer = TimerEntryBuffer()
        let stride = MemoryLayout<TimerHeap.Entry>.stride
        let large = 3 * TimerEntryBuffer.mappingGranule / stride  // three mapping granules' worth
        var sawMallocSize = false
        for index in 0..<large {
            buffer.append(TimerHeap.Entry(fireDate: Int64(index), generation: 7, timer: shared))
            if buffer.capacity * stride < TimerEntryBuffer.mappingGranule { sawMallocSize = true }
        }
        #expect(sawMallocSize)
        // A mapping is a whole number of granules.
        #expect(buffer.mappedBytes > 0 && buffer.mappedBytes % TimerEntryBuffer.mappingGranule == 0)
        #expect(buffer.capacity == buffer.mappedBytes / stride)
        #expect(buffer.count == large)
        #expect(buffer.elements.enumerated().allSatisfy { $0.element.fireDate == Int64($0.offset) })
        #expect(buffer.removeLast().fireDate == Int64(large - 1))

        // Shrinking to a mapping, then below the threshold into malloc's memory, keeps the prefix.
        for kept in [large / 5, 1_000] {
            buffer.truncate(to: kept)
            buffer.shrinkIfSparse()
            #expect(buffer.capacity == 2 * kept || buffer.mappedBytes % TimerEntryBuffer.mappingGranule == 0)
            #expect(buffer.capacity < large)
            #expect(buffer.elements.enumerated().allSatisfy { $0.element.fireDate == Int64($0.offset) })
        }
        #expect(buffer.capacity == 2_000 && buffer.mappedBytes == 0)
        buffer.removeAll()
        #expect(buffer.count == 0 && buffer.capacity == 0)
        buffer.append(TimerHeap.Entry(fireDate: 42, generation: 7, timer: shared))
        #expect(buffer.elements.map(\.fireDate) == [42])
    }

    @Test("R35 a heap grown past the mapping threshold and compacted after invalidations keeps its order")
    func largeHeapCompaction() {
        var generator = SystemRandomNumberGenerator()
        var heap = TimerHeap()
        var timers: [LoopTimer] = []
        let count = 200_000  // 4.8 MB of entries: a mapping
        for sequence in 1...UInt64(count) {
            let item = timer()
            heap.push(entry(item, Int64.random(in: 0..<1_000_000, using: &generator), sequence: sequence))
            timers.append(item)
        }
        // Nine in ten go stale: the compaction shrinks the buffer (into malloc's memory).
        for (index, item) in timers.enumerated() where index % 10 != 0 {
            item.generation &+= 1
            heap.noteStale()
        }
        heap.checkInvariants()
        #expect(heap.liveCount == count / 10)
        var due: [TimerHeap.Entry] = []
        heap.popDue(asOf: .max, into: &due)
        #expect(due.count == count / 10)
        #expect(zip(due, due.dropFirst()).allSatisfy { TimerHeap.precedes($0, $1) })
        due.forEach(TimerHeap.release)
        var graveyard = heap.takeGraveyard()
        TimerHeap.release(&graveyard)
    }
}
