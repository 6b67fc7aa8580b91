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

    private struct State {
        var scheduled = false
        var due = DispatchTime(uptimeNanoseconds: 0)
    }

    private static let state = Mutex(State())

    /// A teardown dropped many timers: return the free memory `delay` after the last such call.
    static func noteTeardown() {
        let due = DispatchTime.now() + delay
        let mustSchedule = state.withLock { state in
            state.due = due
            defer { state.scheduled = true }
            return !state.scheduled
        }
        if mustSchedule { schedule(at: due) }
    }

    private static func schedule(at due: DispatchTime) {
        // Off every loop's thread: trimming a large heap takes milliseconds.
        DispatchQueue.global(qos: .utility).asyncAfter(deadline: due) { fire() }
    }

    private static func fire() {
        let later: DispatchTime? = state.withLock { state in
            if state.due > .now() { return state.due }  // another teardown since: wait for it
            state.scheduled = false
            return nil
        }
        if let later { schedule(at: later) } else { cloop_return_free_memory() }
    }
}
