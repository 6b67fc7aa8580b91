/// One timer's place in one mode of its loop.
///
/// A timer scheduled in several modes shares one schedule (SPEC R33) but sits in each mode's heap;
/// the membership is the heap's element, so moving it in the heap updates its index in O(1).
///
/// All fields are guarded by the lock of the loop the timer belongs to.
final class TimerMembership {
    let timer: LoopTimer
    unowned let mode: ModeState
    /// The position in `mode.timerHeap`, or -1 while the timer is firing (out of every heap).
    var heapIndex = -1

    init(timer: LoopTimer, mode: ModeState) {
        self.timer = timer
        self.mode = mode
    }
}

/// A binary min-heap of a mode's timers keyed by (fire date, sequence), so timers due at the same
/// date fire in the order they were added (SPEC R35). Insert, remove and reposition are
/// O(log n); collecting the due timers and finding the coalesced wake-up time are O(k) in the
/// number of timers due (SPEC R43).
///
/// Guarded by the owning loop's lock.
struct TimerHeap {
    struct Entry {
        /// The fire date (loop time).
        var fireDate: Int64
        /// `fireDate + tolerance`: the latest moment the timer may fire (SPEC R43).
        var latest: Int64
        /// The order the timer was added to its loop in; breaks ties between equal dates.
        var sequence: UInt64
        let membership: TimerMembership

        @inline(__always)
        func firesBefore(_ other: Entry) -> Bool {
            fireDate != other.fireDate ? fireDate < other.fireDate : sequence < other.sequence
        }
    }

    private(set) var entries: [Entry] = []

    var isEmpty: Bool { entries.isEmpty }
    var count: Int { entries.count }

    /// The earliest fire date, if any.
    var earliestFireDate: Int64? { entries.first?.fireDate }

    mutating func insert(_ entry: Entry) {
        entries.append(entry)
        entries[entries.count - 1].membership.heapIndex = entries.count - 1
        siftUp(entries.count - 1)
    }

    /// Removes the entry at `index` and marks its membership as out of the heap.
    mutating func remove(at index: Int) {
        let last = entries.count - 1
        entries[index].membership.heapIndex = -1
        if index != last {
            entries.swapAt(index, last)
            entries[index].membership.heapIndex = index
        }
        entries.removeLast()
        if index < entries.count {
            if !siftUp(index) { siftDown(index) }
        }
    }

    /// Changes the dates of the entry at `index` and restores the heap order.
    mutating func update(at index: Int, fireDate: Int64, latest: Int64) {
        entries[index].fireDate = fireDate
        entries[index].latest = latest
        if !siftUp(index) { siftDown(index) }
    }

    /// The moment to wake up so that every timer fires inside its tolerance window while waking as
    /// late as possible (SPEC R43): the earliest `latest` over all timers. Only timers whose fire
    /// date is at or before the running minimum can lower it, so the walk prunes every subtree
    /// that starts after it.
    func wakeDeadline() -> Int64 {
        guard let first = entries.first else { return LoopTime.distantFuture }
        var deadline = first.latest
        visit(0, deadline: &deadline)
        return deadline
    }

    private func visit(_ index: Int, deadline: inout Int64) {
        guard index < entries.count, entries[index].fireDate <= deadline else { return }
        deadline = min(deadline, entries[index].latest)
        visit(2 * index + 1, deadline: &deadline)
        visit(2 * index + 2, deadline: &deadline)
    }

    /// Appends every entry whose fire date is at or before `now` to `due` (unordered).
    func collectDue(asOf now: Int64, into due: inout [Entry]) {
        collect(0, now: now, into: &due)
    }

    private func collect(_ index: Int, now: Int64, into due: inout [Entry]) {
        guard index < entries.count, entries[index].fireDate <= now else { return }
        due.append(entries[index])
        collect(2 * index + 1, now: now, into: &due)
        collect(2 * index + 2, now: now, into: &due)
    }

    @discardableResult
    private mutating func siftUp(_ start: Int) -> Bool {
        var index = start
        while index > 0 {
            let parent = (index - 1) / 2
            guard entries[index].firesBefore(entries[parent]) else { break }
            entries.swapAt(index, parent)
            entries[index].membership.heapIndex = index
            entries[parent].membership.heapIndex = parent
            index = parent
        }
        return index != start
    }

    private mutating func siftDown(_ start: Int) {
        var index = start
        let count = entries.count
        while true {
            let left = 2 * index + 1
            guard left < count else { break }
            var smallest = left
            let right = left + 1
            if right < count && entries[right].firesBefore(entries[left]) { smallest = right }
            guard entries[smallest].firesBefore(entries[index]) else { break }
            entries.swapAt(index, smallest)
            entries[index].membership.heapIndex = index
            entries[smallest].membership.heapIndex = smallest
            index = smallest
        }
    }
}
