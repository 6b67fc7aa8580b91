import CLoopRuntimeShims

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The growable array behind a `TimerHeap`: its entries in one block of memory, which the heap
/// sifts in place.
///
/// A Swift `Array` would do, but not at a million timers. Each time an array doubles, it allocates
/// a fresh block, copies itself over and frees the old one. Past glibc's mmap threshold, each
/// fresh block is a new mapping whose every 4 KiB page faults on first write. That is 48 MB of
/// faults and 24 MB of copies to grow to a million entries, a large share of the cost of
/// scheduling a million timers (BENCHMARKS.md, "Why the code is as it is"). So
/// small buffers live in `malloc`'s memory and grow by `realloc`. From 2 MiB on, a buffer is a
/// mapping of its own, with transparent huge pages requested if the application opted in
/// (`Loop.largeTimerHeapsUseHugePages`: one fault per 2 MiB). It grows by `mremap`, which moves
/// the pages instead of copying them, and shrinking gives the cut pages back at once.
///
/// Entries are plain data (`TimerHeap.Entry` holds its timer `Unmanaged`), so moving them
/// bitwise is valid and nothing here counts references.
///
/// Guarded by the owning loop's lock, like the heap; owned by exactly one heap.
final class TimerEntryBuffer {
    typealias Entry = TimerHeap.Entry

    private var base: UnsafeMutablePointer<Entry>?
    private(set) var count = 0
    private(set) var capacity = 0
    /// The mapping's size when `base` is a mapping (`cloop_map_memory`); 0 when it is `malloc`'s.
    private(set) var mappedBytes = 0

    deinit { release() }

    /// The entries, valid until the next change of the buffer.
    @inline(__always)
    var elements: UnsafeMutableBufferPointer<Entry> { UnsafeMutableBufferPointer(start: base, count: count) }

    @inline(__always)
    func append(_ entry: Entry) {
        if count == capacity { resize(toHold: Swift.max(16, capacity * 2)) }
        (base.unsafelyUnwrapped + count).initialize(to: entry)
        count += 1
    }

    /// Removes and returns the last entry. The buffer must not be empty.
    @inline(__always)
    func removeLast() -> Entry {
        precondition(count > 0, "TimerEntryBuffer: removeLast on an empty buffer")
        count -= 1
        return (base.unsafelyUnwrapped + count).move()
    }

    /// Keeps the first `newCount` entries (plain data: nothing to deinitialize).
    func truncate(to newCount: Int) {
        precondition(newCount >= 0 && newCount <= count, "TimerEntryBuffer: truncate(to: \(newCount)) of \(count)")
        count = newCount
    }

    /// Gives memory back when at most a quarter of a large buffer is used: it shrinks to twice its
    /// count. Called after compactions (invalidations, removals), not after firings: a loop that
    /// fires a batch usually refills the heap soon.
    func shrinkIfSparse() {
        // Only mappings: a `malloc` buffer (under 2 MiB) is kept for the next burst of timers,
        // whose growth would otherwise fault its pages in again (a 10,000-timer teardown and
        // rebuild paid ~50 page faults for ~400 KiB).
        guard mappedBytes > 0, count < capacity / 4 else { return }
        resize(toHold: Swift.max(16, count * 2))
    }

    /// Empties the buffer and gives its memory back.
    func removeAll() {
        release()
        base = nil
        count = 0
        capacity = 0
        mappedBytes = 0
    }

    // MARK: - Memory

    /// From this size on a buffer is a mapping of its own, a whole number of 2 MiB huge pages.
    static let mappingGranule = 2 << 20

    private func resize(toHold wanted: Int) {
        let stride = MemoryLayout<Entry>.stride
        let wantedBytes = wanted * stride
        if wantedBytes >= Self.mappingGranule, let mapped = mapping(bytes: roundedUp(wantedBytes)) {
            base = mapped.base
            mappedBytes = mapped.bytes
            capacity = mapped.bytes / stride
        } else {
            base = reallocated(bytes: wantedBytes)
            mappedBytes = 0
            capacity = wanted
        }
    }

    private func roundedUp(_ bytes: Int) -> Int {
        (bytes + Self.mappingGranule - 1) / Self.mappingGranule * Self.mappingGranule
    }

    /// `bytes` of mapped memory holding the current entries: the current mapping resized, or a
    /// new one. nil if the system refused (then `malloc` is used instead).
    private func mapping(bytes: Int) -> (base: UnsafeMutablePointer<Entry>, bytes: Int)? {
        if mappedBytes > 0 {
            guard let moved = cloop_remap_memory(base, mappedBytes, bytes) else { return nil }
            return (moved.assumingMemoryBound(to: Entry.self), bytes)
        }
        guard let fresh = cloop_map_memory(bytes, hugePagesForTimerHeaps.load(ordering: .relaxed)) else { return nil }
        let entries = fresh.bindMemory(to: Entry.self, capacity: bytes / MemoryLayout<Entry>.stride)
        if let base { entries.moveInitialize(from: base, count: count) }
        free(base)
        return (entries, bytes)
    }

    /// `bytes` of `malloc`'s memory holding the current entries.
    private func reallocated(bytes: Int) -> UnsafeMutablePointer<Entry> {
        let stride = MemoryLayout<Entry>.stride
        if mappedBytes > 0 {
            // Leaving a mapping (shrunk below 2 MiB, or mremap refused): copy, then unmap.
            guard let fresh = malloc(bytes) else { outOfMemory(bytes) }
            let entries = fresh.bindMemory(to: Entry.self, capacity: bytes / stride)
            entries.moveInitialize(from: base.unsafelyUnwrapped, count: count)
            _ = cloop_unmap_memory(base, mappedBytes)
            return entries
        }
        guard let grown = realloc(base, bytes) else { outOfMemory(bytes) }
        return grown.bindMemory(to: Entry.self, capacity: bytes / stride)
    }

    private func release() {
        if mappedBytes > 0 {
            _ = cloop_unmap_memory(base, mappedBytes)
        } else {
            free(base)
        }
    }

    private func outOfMemory(_ bytes: Int) -> Never {
        fatalError(
            "LoopRuntime: out of memory growing a timer heap to \(bytes) bytes for \(count) timers (malloc: errno \(errno))"
        )
    }
}
