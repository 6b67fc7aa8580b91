import CLoopRuntimeShims
import Synchronization

// Process-wide memory policy is the application's to set: the library never trims the allocator
// or asks for huge pages by itself. These are the calls an application makes when it wants to.

extension Loop {
    /// Hands the memory that is free in the C allocator back to the system (glibc's
    /// `malloc_trim(0)`; nothing with other C libraries).
    ///
    /// glibc keeps freed small blocks on its free lists for reuse and returns them only when asked.
    /// After a loop let go of a very large number of timers (a teardown of a million of them frees
    /// about 120 MB of small blocks), that memory stays resident until something asks. The library
    /// never asks by itself — trimming stalls other threads' `malloc` for milliseconds, and right
    /// after a teardown it makes the next burst of allocations fault every page in again — so call
    /// this when your program knows the memory will not be needed soon.
    ///
    /// - Important: Safe from any thread. It takes the allocator's locks: call it off the loops
    ///   whose latency matters.
    public static func returnFreeMemory() {
        cloop_return_free_memory()
    }

    /// Whether the memory of very large timer heaps asks the kernel for transparent huge pages
    /// (`madvise(MADV_HUGEPAGE)`); `false` unless the application turns it on.
    ///
    /// A mode's timer heap of about 90,000 timers and more (2 MiB of entries) lives in a mapping of
    /// its own that grows by `mremap`. With huge pages it faults once per 2 MiB instead of once per
    /// 4 KiB page — scheduling a million timers is faster (BENCHMARKS.md, "Timers") — but huge
    /// pages are the system's policy to decide (memory use, compaction stalls), so the library does
    /// not ask for them unless told to. Applies to mappings made after it is set.
    ///
    /// - Important: Safe from any thread.
    public static var largeTimerHeapsUseHugePages: Bool {
        get { hugePagesForTimerHeaps.load(ordering: .relaxed) }
        set { hugePagesForTimerHeaps.store(newValue, ordering: .relaxed) }
    }
}

/// The storage of `Loop.largeTimerHeapsUseHugePages`.
let hugePagesForTimerHeaps = Atomic<Bool>(false)

// The timer entries a loop lets go of: released after unlocking, their memory left with the
// allocator (see `Loop.returnFreeMemory()`).

extension Loop {
    /// Releases timer entries the loop let go of, on the calling thread with no lock held (a
    /// timer's last release may run user code). The memory they free stays with the allocator;
    /// handing it back to the system is the application's call (`Loop.returnFreeMemory()`).
    func releaseDropped(_ dead: inout [TimerHeap.Entry]) {
        TimerHeap.release(&dead)
    }

    /// Runs `body` under the loop's lock, then gives back, after unlocking, the timer entries that
    /// were dropped and not released yet (by `body` or before it): for locked sections after
    /// which no timer step of a pass may come for a long time.
    @inline(__always)
    func withLockReleasingDroppedTimers<R>(_ body: () -> R) -> R {
        let (result, dropped) = lock.withLock { (body(), state.timerGraveyard.takeIfAny()) }
        if var dropped { releaseDropped(&dropped) }
        return result
    }
}
