import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// Big timer batches, a timer's memory and the invalidation race at firing time: the paths a
/// million-timer workload takes (radix-sorted batches, release in memory order, compaction).
@Suite("Timer batches (SPEC R35, R36, R39)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct TimerBatchTests {
    @Test("R35 thousands of timers due in one pass fire in date order, ties in add order")
    func bigBatchOrder() {
        let (loop, waiter) = makeManualLoop()
        var generator = SystemRandomNumberGenerator()
        let count = 5_000
        let fired = Locked<[Int]>([])
        let released = Counter()
        // Dates from a small set, so that most timers tie with others; all in the past.
        let dates = (0..<count).map { _ in Int64.random(in: 0..<300, using: &generator) }
        for index in 0..<count {
            let probe = DeinitProbe { released.increment() }
            let timer = LoopTimer(fireAt: waiter.virtualNow - .milliseconds(1) - .microseconds(dates[index])) { _ in
                _ = probe
                fired.withLock { $0.append(index) }
            }
            loop.add(timer, forMode: .default)
        }
        loop.run(.default, for: .zero)
        // Earlier dates first (larger offsets into the past), equal dates in the order added.
        let expected = (0..<count).sorted { (-dates[$0], $0) < (-dates[$1], $1) }
        #expect(fired.withLock { $0 } == expected)
        // R36: each fired one-shot timer was invalidated, and the loop let go of every one of them
        // (the batch's references are released in memory order after it) before the run returned.
        #expect(released.count == count)
        #expect(loop.timerCount(forMode: .default) == 0)
        #expect(loop.run(.default, for: .zero) == .finished)
    }

    @Test("R39 timers invalidated in bulk are given back by the invalidations, with their memory")
    func invalidatedInBulkAreReleased() {
        let (loop, waiter) = makeManualLoop()
        let count = 100_000  // enough for the heap's buffer to be a mapping (2 MiB and up)
        let released = Counter()
        var timers: [LoopTimer] = []
        let keep = LoopTimer(fireAt: waiter.virtualNow + .seconds(7_200)) { _ in }
        loop.add(keep, forMode: .default)
        for offset in 0..<count {
            let probe = DeinitProbe { released.increment() }
            let timer = LoopTimer(fireAt: waiter.virtualNow + .seconds(60) + .microseconds(offset)) { _ in _ = probe }
            loop.add(timer, forMode: .default)
            timers.append(timer)
        }
        for timer in timers.shuffled() { timer.invalidate() }
        timers = []
        #expect(loop.timerCount(forMode: .default) == 1)
        // Before any pass: the invalidations compacted the heap and let go of the timers. At most
        // the few still marked stale (fewer than the live ones) wait for the pass.
        #expect(released.count >= count - 1)
        #expect(loop.run(.default, for: .zero) == .timedOut)
        #expect(released.count == count)
        // The heap compacted and gave its mapping back: what is left of its buffer is under
        // 2 MiB (kept in malloc's memory for the next burst), not a hundred thousand slots.
        let capacity = loop.lock.withLock { loop.state.modes[.default]!.timerHeap.capacity }
        #expect(capacity * MemoryLayout<TimerHeap.Entry>.stride < TimerEntryBuffer.mappingGranule)
        #expect(capacity < count / 2)
        #expect(loop.nextFireDate(forMode: .default) == keep.fireDate)
    }

    @Test("R39 an invalidated timer is let go of at once by a loop that never runs again")
    func invalidatedWithoutAPass() {
        let (loop, waiter) = makeManualLoop()
        let released = Counter()
        // A lone timer (its entry is the heap's root) and a thousand (the heap compacts); the mode
        // is empty afterwards, so a run call makes no pass that could give them back.
        for count in [1, 1_000] {
            var timers: [LoopTimer] = []
            for offset in 0..<count {
                let probe = DeinitProbe { released.increment() }
                let timer = LoopTimer(fireAt: waiter.virtualNow + .seconds(3_600) + .microseconds(offset)) { _ in
                    _ = probe
                }
                loop.add(timer, forMode: .default)
                timers.append(timer)
            }
            let before = released.count
            for timer in timers { timer.invalidate() }
            timers = []
            #expect(released.count == before + count)
        }
        #expect(loop.run(.default, for: .zero) == .finished)
    }

    /// Issue #31, case 13: the library used to trim the process's allocator by itself after big
    /// teardowns; memory goes back only when the application asks (in a process of its own, so
    /// that no other test's allocations move the resident set).
    @Test("Loop.returnFreeMemory hands the memory of a big timer teardown back to the system; nothing else does")
    func returnFreeMemoryOnRequest() async {
        await #expect(processExitsWith: .success) {
            // The sanitizers replace glibc's allocator (and keep freed memory in quarantine):
            // trimming is glibc's, measured only in a plain build.
            for sanitizer in ["__asan_init", "__tsan_init"] {
                guard dlsym(UnsafeMutableRawPointer(bitPattern: 0), sanitizer) == nil else { return }
            }
            let (loop, waiter) = makeManualLoop()
            var timers: [LoopTimer] = []
            for offset in 0..<300_000 {  // about 38 MB of timers
                let timer = LoopTimer(fireAt: waiter.virtualNow + .seconds(3_600) + .microseconds(offset)) { _ in }
                loop.add(timer, forMode: .default)
                timers.append(timer)
            }
            for timer in timers { timer.invalidate() }
            timers = []
            loop.run(.default, for: .zero)
            let kept = residentBytes()
            usleep(1_500_000)
            // Nothing handed it back by itself.
            precondition(residentBytes() > kept - 10_000_000, "the library trimmed the allocator by itself")
            Loop.returnFreeMemory()
            precondition(residentBytes() < kept - 15_000_000, "returnFreeMemory gave back too little")
        }
    }

    /// Issue #31, case 13: the mapping of a big timer heap asked for transparent huge pages by
    /// itself; now only when the application opts in (`VmFlags: hg` in /proc/self/smaps is the
    /// kernel's record of `MADV_HUGEPAGE`).
    @Test("A big timer heap's mapping asks for huge pages only when the application opted in")
    func hugePagesAreOptIn() async {
        await #expect(processExitsWith: .success) {
            for optedIn in [false, true] {
                Loop.largeTimerHeapsUseHugePages = optedIn
                let (loop, waiter) = makeManualLoop()
                var timers: [LoopTimer] = []
                for offset in 0..<100_000 {  // 2.4 MB of heap entries: a mapping of its own
                    let timer = LoopTimer(fireAt: waiter.virtualNow + .seconds(60) + .microseconds(offset)) { _ in }
                    loop.add(timer, forMode: .default)
                    timers.append(timer)
                }
                let base = loop.lock.withLock { loop.state.modes[.default]!.timerHeap.entries.baseAddress! }
                let flags = vmFlags(ofMappingAt: UInt(bitPattern: base))
                precondition(flags != nil, "no mapping holds the heap")
                precondition(
                    flags!.contains("hg") == optedIn, "opted in: \(optedIn), VmFlags: \(flags!.joined(separator: " "))")
                for timer in timers { timer.invalidate() }
            }
        }
    }

    @Test("R41 a timer invalidated from another thread is let go of while its loop sleeps")
    func invalidatedWhileAsleep() throws {
        let thread = try LoopThread(name: "graveyard")
        defer { thread.shutdown() }
        let released = Flag()
        let fired = Flag()
        let probe = DeinitProbe { released.set(true) }
        var timer: LoopTimer? = LoopTimer(fireAt: .now + .seconds(3_600)) { [probe] _ in
            _ = probe
            fired.set(true)
        }
        thread.loop.add(timer!, forMode: .default)
        try thread.perform(waitUntilDone: true) {}  // the loop has seen the timer; it now sleeps
        timer!.invalidate()  // re-arms the sleeping loop without waking it (SPEC R41)
        timer = nil
        _ = consume probe  // the timer's handler holds the last reference
        #expect(released.value)  // not an hour later, nor at the loop's next wake-up
        #expect(!fired.value)
    }

    /// Memory safety (issue #31, case 1): a small batch gives each entry's reference back right
    /// after its callout, so a nested run in the same mode must look only at the entries still
    /// waiting their turn — never at one already given back, whose timer may be gone. Under
    /// AddressSanitizer the old code read the freed first timer here (heap-use-after-free).
    @Test("R42 R35 a nested run in a timer's callout fires the batch's waiting timers, never one already let go of")
    func nestedRunSkipsReleasedEntries() {
        let (loop, waiter) = makeManualLoop()
        loop.add(keepAliveSource(), forMode: .default)
        let trace = Trace()
        let released = Flag()
        // First in the batch, held by the loop alone: freed right after its callout.
        do {
            let probe = DeinitProbe { released.set(true) }
            loop.perform(after: .zero) {
                _ = probe
                trace.append("first")
            }
        }
        let due = waiter.virtualNow
        loop.add(
            LoopTimer(fireAt: due) { _ in
                trace.append("modal")
                // A modal loop in the same mode: fires the batch's timers still waiting (SPEC R42).
                trace.append("nested:\(loop.run(.default, for: .zero))")
                trace.append(released.value ? "first-released" : "first-held")
            }, forMode: .default)
        let waiting = LoopTimer(fireAt: due) { _ in trace.append("waiting") }
        loop.add(waiting, forMode: .default)
        #expect(loop.run(.default, for: .zero) == .timedOut)
        // The waiting timer fires once, in the nested run; the outer batch then finds it stale.
        #expect(trace.text == "first modal waiting nested:timedOut first-released")
        #expect(!waiting.isValid)
        #expect(loop.timerCount(forMode: .default) == 0)
    }

    @Test("M5 a positive interval below a nanosecond still repeats, at loop time's resolution")
    func subNanosecondInterval() {
        let (loop, waiter) = makeManualLoop()
        let calls = Counter()
        let tiny = Duration(secondsComponent: 0, attosecondsComponent: 1)
        let timer = LoopTimer(fireAt: waiter.virtualNow, interval: tiny) { timer in
            if calls.increment() == 3 { timer.invalidate() }
        }
        #expect(timer.isRepeating)
        #expect(timer.interval == .nanoseconds(1))
        loop.add(timer, forMode: .default)
        for _ in 0..<3 {
            waiter.advance(by: .microseconds(1))
            loop.run(.default, for: .zero)
        }
        #expect(calls.count == 3)
        #expect(!timer.isValid)
    }

    @Test("R39 a timer invalidated on another thread while its batch fires never runs after invalidate() returns (×40)")
    func invalidationRacesBatch() throws {
        for _ in 0..<40 {
            let thread = try LoopThread(name: "batch")
            let count = 2_000
            let invalidated = (0..<count).map { _ in Flag() }
            let lateCalls = Counter()
            let calls = Counter()
            let timers = (0..<count).map { index in
                LoopTimer(fireAt: .now - .milliseconds(1)) { _ in
                    if invalidated[index].value { lateCalls.increment() }
                    calls.increment()
                    for _ in 0..<20 { sched_yield() }  // a batch long enough to overlap the invalidations
                }
            }
            // Added on the loop's thread in one block, so the whole batch is due in one pass.
            let added = Flag()
            try thread.perform {
                for timer in timers { thread.loop.add(timer, forMode: .default) }
                added.set(true)
            }
            while !added.value { sched_yield() }
            for index in (0..<count).shuffled() {
                timers[index].invalidate()
                invalidated[index].set(true)
            }
            // invalidate() leaves every mode before it returns, fired or not.
            #expect(thread.loop.timerCount(forMode: .default) == 0)
            thread.shutdown()
            #expect(lateCalls.count == 0)
            #expect(calls.count <= count)
            #expect(timers.allSatisfy { !$0.isValid })
        }
    }
}

@Suite("RadixSort", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct RadixSortTests {
    @Test(
        "Sorts by key over the whole 64-bit range, keeping equal keys in their order",
        arguments: [0, 1, 2, 1_000, 50_000])
    func sortsStably(count: Int) {
        var generator = SystemRandomNumberGenerator()
        // Keys from a few wide-apart clusters (many passes), with duplicates (stability).
        let clusters: [UInt64] = [0, 1 << 20, 1 << 40, .max - 1_000]
        var items = (0..<count).map { index in
            (
                key: clusters.randomElement(using: &generator)! + UInt64.random(in: 0..<100, using: &generator),
                index: index
            )
        }
        let expected = items.sorted { ($0.key, $0.index) < ($1.key, $1.index) }
        items.withUnsafeMutableBufferPointer { buffer in RadixSort.sort(buffer) { $0.key } }
        #expect(items.map(\.index) == expected.map(\.index))
    }
}

/// The process's resident set, from /proc/self/statm.
private func residentBytes() -> Int {
    guard let file = fopen("/proc/self/statm", "r") else { return 0 }
    defer { fclose(file) }
    var size = 0
    var resident = 0
    guard
        withUnsafeMutablePointer(
            to: &size,
            { sizePointer in
                withUnsafeMutablePointer(to: &resident) { residentPointer in
                    withVaList([sizePointer, residentPointer]) { vfscanf(file, "%ld %ld", $0) }
                }
            }) == 2
    else { return 0 }
    return resident * Int(sysconf(Int32(_SC_PAGESIZE)))
}

/// The `VmFlags` of the mapping that holds `address`, from /proc/self/smaps.
private func vmFlags(ofMappingAt address: UInt) -> [String]? {
    guard let file = fopen("/proc/self/smaps", "r") else { return nil }
    defer { fclose(file) }
    var line = [CChar](repeating: 0, count: 4_096)
    var inMapping = false
    while fgets(&line, Int32(line.count), file) != nil {
        let text = String(decoding: line.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let fields = text.split(separator: " ", omittingEmptySubsequences: true)
        if let range = fields.first, range.contains("-"), !range.hasSuffix(":") {
            let bounds = range.split(separator: "-").compactMap { UInt($0, radix: 16) }
            inMapping = bounds.count == 2 && bounds[0] <= address && address < bounds[1]
        } else if inMapping, fields.first == "VmFlags:" {
            return fields.dropFirst().map { String($0.filter { $0 != "\n" }) }
        }
    }
    return nil
}
