import CLoopRuntimeShims
import Dispatch
import Synchronization

/// Hands the allocator's free memory back to the system a while after the last big timer
/// teardown — process-wide, as the allocator is.
///
/// Right after a teardown, the freed memory is what the next burst of timers would reuse: handed
/// back at once, the next million timers fault every page in again (about 23 faults per 1,000
/// timers, several microseconds each in a virtual machine). So the return waits until teardowns
/// have stopped for `delay`, the way allocators with decay (jemalloc's dirty-page decay) do.
enum FreeMemoryReturn {
    /// How long after the last big teardown the memory goes back.
    static let delay: DispatchTimeInterval = .seconds(1)

    /// Timers let go of in batches since the last return that make a teardown.
    static let teardownSize = 65_536

    /// Batches smaller than this are not counted: a steady churn of timers is not a teardown.
    static let countedBatch = 1_024

    private struct State {
        var returns = 0
        var released = 0
        var scheduled = false
        var due = DispatchTime(uptimeNanoseconds: 0)
    }

    private static let state = Mutex(State())

    /// A loop let go of `count` timers at once. A teardown arrives in several batches (each
    /// invalidation that leaves more stale entries than live ones compacts the heap: half of the
    /// timers, then a quarter…), so the batches are added up; once they make a teardown, the free
    /// memory goes back `delay` after the last batch.
    static func noteReleased(_ count: Int) {
        guard count >= countedBatch else { return }
        let due = DispatchTime.now() + delay
        let mustSchedule = state.withLock { state in
            state.released += count
            guard state.released >= teardownSize || state.scheduled else { return false }
            state.due = due
            defer { state.scheduled = true }
            return !state.scheduled
        }
        if mustSchedule { schedule(at: due) }
    }

    /// How many times the memory went back so far (for tests).
    static var returns: Int { state.withLock { $0.returns } }

    private static func schedule(at due: DispatchTime) {
        // Off every loop's thread: trimming a large heap takes milliseconds.
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: due) { fire() }
    }

    private static func fire() {
        let later: DispatchTime? = state.withLock { state in
            if state.due > .now() { return state.due }  // another batch since: wait for it
            state.scheduled = false
            state.released = 0
            state.returns += 1
            return nil
        }
        if let later { schedule(at: later) } else { cloop_return_free_memory() }
    }
}
