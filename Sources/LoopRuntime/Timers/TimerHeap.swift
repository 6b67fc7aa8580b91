import Synchronization

/// A 4-ary min-heap of a mode's timer entries keyed by (fire date, sequence), so timers due at the
/// same date fire in the order they were added (SPEC R35).
///
/// Entries are immutable snapshots of a timer's schedule tagged with the timer's `generation`.
/// Changing a schedule (moving, removing, invalidating, firing) bumps the generation, which makes
/// every entry of the timer stale in O(1), and pushes fresh entries where needed (O(log n)). Stale
/// entries are dropped when they reach the root, or all at once when they outnumber live ones
/// (O(n), amortized O(1) per change). No back-pointers, so sifting touches only this array — the
/// difference between cache-resident and cache-missing heaps at a million timers.
///
/// Entries are plain data: the timer reference is `unowned(unsafe)` and each entry owns one
/// retain of its timer, taken in `push`. Moving and sorting entries therefore costs no reference
/// counting at all. A dropped entry's retain is *not* given back on the spot: the heap is used with
/// its loop's lock held, and the last release of a timer runs user code (its closure's captures'
/// `deinit`), which might call back into the loop and deadlock on that lock. Dropped entries go to
/// a graveyard that whoever held the lock empties after unlocking: the thread whose change dropped
/// them (`Loop.change`), the loop about to sleep, or the loop's pass (`takeGraveyard`). Entries
/// handed out by `popDue` are released by the caller, also outside the lock.
///
/// Taking the due timers pops them in firing order (O(k log n) for k due timers, no sort), and
/// finding the coalesced wake-up time is O(k) in the number of timers inside the first tolerance
/// window (SPEC R43), because the walk prunes every subtree that starts too late.
///
/// Guarded by the owning loop's lock.
struct TimerHeap {
    struct Entry {
        /// The fire date (loop time).
        let fireDate: Int64
        /// Kept alive by the retain this entry owns; read at +0 (`withTimer`) on the hot paths.
        let timerRef: Unmanaged<LoopTimer>
        /// The timer's generation when the entry was made; the entry is live while they match.
        /// 32 bits are enough: compaction drops stale entries long before a generation can wrap.
        let generation: UInt32

        init(fireDate: Int64, generation: UInt32, timer: LoopTimer) {
            self.fireDate = fireDate
            // +0 here: the entry takes its own retain when it enters the heap (`push`) and gives it back when it leaves.
            self.timerRef = Unmanaged.passUnretained(timer)
            self.generation = generation
        }

        /// The timer (a +1 reference; prefer `withTimer` where it counts).
        var timer: LoopTimer { timerRef.takeUnretainedValue() }

        /// Runs `body` with the timer borrowed from the entry's retain: no reference counting.
        @inline(__always)
        func withTimer<R>(_ body: (LoopTimer) -> R) -> R {
            timerRef._withUnsafeGuaranteedRef(body)
        }

        @inline(__always)
        var isLive: Bool { withTimer { $0.generation == generation } }

        /// The order the timer was added to its loop in; breaks ties between equal dates. Read
        /// from the timer rather than stored, which keeps an entry at 24 bytes: equal fire dates
        /// are rare, so the comparison seldom reaches the timer.
        @inline(__always)
        var sequence: UInt64 { withTimer { $0.sequence } }

        /// `fireDate + tolerance` of a live entry: the latest moment it may fire (SPEC R43). A live
        /// entry's date is its timer's fire date, so the timer's tolerance completes it.
        @inline(__always)
        var latest: Int64 { LoopTime.adding(withTimer { $0.boundSchedule.tolerance }, to: fireDate) }
    }

    /// The entries, in heap order. A heap is never copied (it lives in its mode's state), so it
    /// owns its buffer alone.
    private let storage = TimerEntryBuffer()

    /// The entries in heap order; valid until the heap next changes (lock held).
    var entries: UnsafeBufferPointer<Entry> { UnsafeBufferPointer(storage.elements) }
    /// How many of `entries` are stale: exact, or one too many for each timer retired while its
    /// popped entry waited in a due batch (then it is no longer here) — an upper bound, reset by
    /// every compaction and bulk pop. It only paces compaction: liveness is always read from the
    /// entry's generation.
    private var staleCount = 0
    /// Dropped entries whose retains still have to be given back, outside the lock.
    /// Shared by every heap of a loop (all guarded by the loop's lock), so that a pass of any mode
    /// releases what the heaps of modes that never run dropped.
    let graveyard: TimerGraveyard

    init(graveyard: TimerGraveyard = TimerGraveyard()) {
        self.graveyard = graveyard
    }

    /// No entries at all, live or stale.
    var isEmpty: Bool { entries.isEmpty }

    /// How many entries the heap's buffer holds without growing.
    var capacity: Int { storage.capacity }

    /// Entries that still describe their timer's schedule.
    var liveCount: Int { entries.count - staleCount }

    /// Adds an entry; it takes a retain of its timer.
    mutating func push(_ entry: Entry) {
        _ = entry.timerRef.retain()
        storage.append(entry)
        Self.siftUp(storage.elements, from: storage.count - 1)
        // A heap of a mode that never runs is never popped: compact it here once stale entries
        // outnumber live ones (a common repeating timer re-pushes into every common mode at each
        // firing), so it stays within twice its live size.
        if staleCount > 16 && staleCount * 2 > entries.count { prune() }
    }

    /// Gives back the retain owned by an entry returned by `popDue`.
    @inline(__always)
    static func release(_ entry: Entry) {
        entry.timerRef.release()
    }

    /// Gives back the retains of `entries` (fired, dropped or taken from a graveyard) and empties
    /// the array. Outside the lock. Many at once are released in memory order: a timer's release
    /// frees it, and freeing a million objects in deadline order scatters the allocator's free
    /// lists so that every later allocation misses the cache.
    static func release(_ entries: inout [Entry]) {
        if entries.count >= addressOrderThreshold {
            entries.withUnsafeMutableBufferPointer { buffer in
                RadixSort.sort(buffer) { UInt64(UInt(bitPattern: $0.timerRef.toOpaque())) }
            }
        }
        for entry in entries { entry.timerRef.release() }
        entries = []
    }

    /// From this many entries on, `release(_:)` sorts them by address first.
    static let addressOrderThreshold = 1_024

    /// Removes every entry; the caller releases the returned ones (outside the lock).
    mutating func removeAll() -> [Entry] {
        let removed = Array(entries) + graveyard.take()
        storage.removeAll()
        staleCount = 0
        return removed
    }

    /// The dropped entries not yet released; the caller releases them (outside the lock).
    @inline(__always)
    mutating func takeGraveyard() -> [Entry] {
        graveyard.take()
    }

    /// Records that one entry of this heap went stale (its timer's generation moved on).
    mutating func noteStale() {
        staleCount += 1
        // Drop it at once if it is the root (a lone timer invalidated, the soonest one moved), and
        // compact as soon as stale entries outnumber live ones, so that invalidated timers are
        // given back (by the change that made them stale, see `Loop.change`) even if this mode
        // never runs or never sleeps again.
        prune()
    }

    /// Drops every stale entry, whatever their number (see `Loop.retireEntries`).
    mutating func compactStale() {
        guard staleCount > 0 else { return }
        staleCount = entries.count  // forces the compaction below; it counts them afresh
        prune()
    }

    /// Drops stale entries from the root, or compacts when they outnumber live ones, so the root
    /// (if any) is live.
    mutating func prune() {
        guard staleCount > 0 else { return }
        if staleCount * 2 > entries.count {
            var kept = 0
            let buffer = storage.elements
            for index in buffer.indices {
                if buffer[index].isLive {
                    buffer.swapAt(kept, index)
                    kept += 1
                } else {
                    graveyard.entries.append(buffer[index])
                }
            }
            storage.truncate(to: kept)
            // Compaction follows invalidations and removals: a heap that shrank to a quarter of its
            // buffer gives the rest back (firing keeps its buffer for the next batch instead).
            storage.shrinkIfSparse()
            staleCount = 0
            heapify()
            return
        }
        while let root = entries.first, !root.isLive {
            staleCount -= 1
            removeRoot()
            graveyard.entries.append(root)
        }
    }

    /// The earliest fire date of a live entry, if any.
    mutating func earliestFireDate() -> Int64? {
        prune()
        return entries.first?.fireDate
    }

    /// The moment to wake up so that every timer fires inside its tolerance window while waking as
    /// late as possible (SPEC R43): the earliest `latest` over all live entries. Only entries whose
    /// fire date is at or before the running minimum can lower it, so the walk prunes every subtree
    /// that starts after it.
    mutating func wakeDeadline() -> Int64 {
        prune()
        guard let first = entries.first else { return LoopTime.distantFuture }
        var deadline = first.latest
        Self.visit(entries, 0, deadline: &deadline)
        return deadline
    }

    /// Removes every entry whose fire date is at or before `now` and appends the live ones to
    /// `due`, in firing order: ascending fire date, ties in add order (SPEC R35). The caller owns
    /// the appended entries' retains and must `release(_:)` each.
    ///
    /// A few due entries are popped one by one (O(k log n)). When many are due — a loop that was
    /// busy or in another mode while thousands of timers came due — the heap is split in one
    /// linear pass instead, the due part sorted and the rest re-heapified, which touches memory
    /// in order rather than sifting a cold heap k times.
    mutating func popDue(asOf now: Int64, into due: inout [Entry]) {
        guard let root = entries.first, root.fireDate <= now else { return }
        let bulkThreshold = 64 + entries.count / 32
        if countDue(asOf: now, limit: bulkThreshold) < bulkThreshold {
            while let root = entries.first, root.fireDate <= now {
                removeRoot()
                if staleCount == 0 || root.isLive {
                    due.append(root)
                } else {
                    staleCount -= 1
                    graveyard.entries.append(root)
                }
            }
            return
        }
        let start = due.count
        var kept = 0
        let mayBeStale = staleCount > 0  // if not, skip dereferencing a million timers
        let buffer = storage.elements
        for index in buffer.indices {
            guard !mayBeStale || buffer[index].isLive else {
                graveyard.entries.append(buffer[index])
                continue
            }
            if buffer[index].fireDate <= now {
                due.append(buffer[index])
            } else {
                buffer.swapAt(kept, index)
                kept += 1
            }
        }
        storage.truncate(to: kept)
        staleCount = 0
        heapify()
        due.withUnsafeMutableBufferPointer { buffer in
            Self.sort(UnsafeMutableBufferPointer(rebasing: buffer[start...]))
        }
    }

    /// Sorts entries into firing order. Large batches: a radix sort by date (stable), then each
    /// run of equal dates by add order (rare: it reads the timers). Small ones: a quicksort.
    private static func sort(_ buffer: UnsafeMutableBufferPointer<Entry>) {
        guard buffer.count >= 1_024 else { return quicksort(buffer) }
        // Flipping the sign bit maps signed dates onto unsigned keys in the same order.
        RadixSort.sort(buffer) { UInt64(bitPattern: $0.fireDate) ^ (1 << 63) }
        var runStart = 0
        for index in 1...buffer.count {
            guard index == buffer.count || buffer[index].fireDate != buffer[runStart].fireDate else { continue }
            if index - runStart > 1 {
                quicksort(UnsafeMutableBufferPointer(rebasing: buffer[runStart..<index]))
            }
            runStart = index
        }
    }

    /// An in-place quicksort (median of three, insertion sort for short ranges). Entries are plain
    /// data and their keys are unique (the sequence breaks ties), so stability is not needed and
    /// no buffer is allocated.
    private static func quicksort(_ buffer: UnsafeMutableBufferPointer<Entry>) {
        var low = 0
        var high = buffer.count - 1
        while high - low > 16 {
            let middle = low + (high - low) / 2
            if precedes(buffer[middle], buffer[low]) { buffer.swapAt(middle, low) }
            if precedes(buffer[high], buffer[low]) { buffer.swapAt(high, low) }
            if precedes(buffer[high], buffer[middle]) { buffer.swapAt(high, middle) }
            let pivot = buffer[middle]
            var left = low
            var right = high
            while left <= right {
                while precedes(buffer[left], pivot) { left += 1 }
                while precedes(pivot, buffer[right]) { right -= 1 }
                if left <= right {
                    buffer.swapAt(left, right)
                    left += 1
                    right -= 1
                }
            }
            // Recurse into the smaller side, loop on the larger: O(log n) stack.
            if right - low < high - left {
                quicksort(UnsafeMutableBufferPointer(rebasing: buffer[low...right]))
                low = left
            } else {
                quicksort(UnsafeMutableBufferPointer(rebasing: buffer[left...high]))
                high = right
            }
        }
        guard high > low else { return }
        for index in (low + 1)...high {
            let current = buffer[index]
            var position = index
            while position > low && precedes(current, buffer[position - 1]) {
                buffer[position] = buffer[position - 1]
                position -= 1
            }
            buffer[position] = current
        }
    }

    /// The number of entries due at `now`, counting at most `limit`.
    private func countDue(asOf now: Int64, limit: Int) -> Int {
        var count = 0
        Self.count(entries, 0, now: now, limit: limit, into: &count)
        return count
    }

    private mutating func heapify() {
        let buffer = storage.elements
        guard buffer.count > 1 else { return }
        for index in stride(from: (buffer.count - 2) / 4, through: 0, by: -1) {
            Self.siftDown(buffer, from: index)
        }
    }

    private mutating func removeRoot() {
        let last = storage.removeLast()
        if storage.count > 0 {
            storage.elements[0] = last
            Self.siftDown(storage.elements, from: 0)
        }
    }

    // MARK: - Invariants

    /// Traps, naming the broken rule, unless the heap is consistent: every entry precedes none of
    /// its ancestors (4-ary heap order on (fire date, sequence)); `staleCount` is at least the
    /// number of stale entries; a timer has at most one live entry here; and every entry (in the
    /// heap or its graveyard) still holds a live timer — its retain keeps it alive. O(n); for
    /// tests, after each mutation (swift-collections checks its `Heap` the same way).
    func checkInvariants() {
        var stale = 0
        var live = Set<ObjectIdentifier>()
        for (index, entry) in entries.enumerated() {
            if index > 0 {
                let parent = entries[(index - 1) / 4]
                precondition(
                    !Self.precedes(entry, parent),
                    "TimerHeap: entry \(index) (date \(entry.fireDate), sequence \(entry.sequence)) precedes its parent (date \(parent.fireDate), sequence \(parent.sequence))"
                )
            }
            if entry.isLive {
                precondition(
                    live.insert(ObjectIdentifier(entry.timer)).inserted,
                    "TimerHeap: timer with sequence \(entry.sequence) has two live entries in one heap")
            } else {
                stale += 1
            }
        }
        precondition(stale <= staleCount, "TimerHeap: \(stale) stale entries, but staleCount is \(staleCount)")
        for entry in Array(entries) + graveyard.entries {
            // An entry's own retain: the timer is alive (reading its generation would crash
            // otherwise, under the address sanitizer at least).
            _ = entry.withTimer { $0.generation }
        }
    }

    // MARK: - Heap mechanics (on buffers: bitwise moves, no reference counting)

    @inline(__always)
    static func precedes(_ a: Entry, _ b: Entry) -> Bool {
        a.fireDate != b.fireDate ? a.fireDate < b.fireDate : a.sequence < b.sequence
    }

    private static func siftUp(_ buffer: UnsafeMutableBufferPointer<Entry>, from start: Int) {
        var index = start
        while index > 0 {
            let parent = (index - 1) / 4
            guard precedes(buffer[index], buffer[parent]) else { return }
            buffer.swapAt(index, parent)
            index = parent
        }
    }

    private static func siftDown(_ buffer: UnsafeMutableBufferPointer<Entry>, from start: Int) {
        var index = start
        let count = buffer.count
        while true {
            let firstChild = 4 * index + 1
            guard firstChild < count else { return }
            var smallest = firstChild
            var child = firstChild + 1
            let end = min(firstChild + 4, count)
            while child < end {
                if precedes(buffer[child], buffer[smallest]) { smallest = child }
                child += 1
            }
            guard precedes(buffer[smallest], buffer[index]) else { return }
            buffer.swapAt(index, smallest)
            index = smallest
        }
    }

    private static func count(
        _ buffer: UnsafeBufferPointer<Entry>, _ index: Int, now: Int64, limit: Int, into count: inout Int
    ) {
        guard count < limit, index < buffer.count, buffer[index].fireDate <= now else { return }
        count += 1
        let firstChild = 4 * index + 1
        guard firstChild < buffer.count else { return }
        for child in firstChild..<min(firstChild + 4, buffer.count) {
            Self.count(buffer, child, now: now, limit: limit, into: &count)
        }
    }

    private static func visit(_ buffer: UnsafeBufferPointer<Entry>, _ index: Int, deadline: inout Int64) {
        guard index < buffer.count, buffer[index].fireDate <= deadline else { return }
        if buffer[index].isLive { deadline = min(deadline, buffer[index].latest) }
        let firstChild = 4 * index + 1
        guard firstChild < buffer.count else { return }
        for child in firstChild..<min(firstChild + 4, buffer.count) {
            visit(buffer, child, deadline: &deadline)
        }
    }
}

/// Timer-heap entries dropped while the loop's lock was held, whose retains are given back after
/// unlocking (the last release of a timer may run user code). One per loop, shared by its heaps.
/// Guarded by the loop's lock; `mayHaveEntries` is read without it (loop thread) to skip the lock.
final class TimerGraveyard {
    /// Guarded by the loop's lock.
    @exclusivity(unchecked) var entries: [TimerHeap.Entry] = [] {
        didSet { mirror.update(!entries.isEmpty) }
    }
    private let mirror = Atomic<Bool>(false)

    /// Without the lock: false only if there is nothing to release.
    var mayHaveEntries: Bool { mirror.load(ordering: .acquiring) }

    /// Takes every entry out (cheap when there is none).
    @inline(__always)
    func take() -> [TimerHeap.Entry] {
        guard !entries.isEmpty else { return [] }
        defer { entries = [] }
        return entries
    }

    /// Takes every entry out, or returns `nil` (no array traffic) when there is none.
    @inline(__always)
    func takeIfAny() -> [TimerHeap.Entry]? {
        entries.isEmpty ? nil : take()
    }
}
