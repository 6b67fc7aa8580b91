import CLoopRuntimeShims
import Dispatch

extension Loop {
    /// Makes the main loop service `DispatchQueue.main` (and so `@MainActor` code), the way the
    /// main CFRunLoop does on Apple platforms (SPEC R56).
    ///
    /// Called when the main loop starts a run in a common mode on the main thread: from then on,
    /// libdispatch's main-queue handle (an eventfd) is a descriptor source of the main loop's
    /// common modes. When it is ready, the loop resets it (a read — without it the descriptor stays
    /// readable and the loop spins) and drains the main queue; the drain counts as a handled source
    /// (SPEC R15). A run in a mode outside the common set does not drain the main queue: main-queue
    /// work waits until the loop is back in a common mode. Like CFRunLoop's main loop, a common mode
    /// of the main loop is then never empty (SPEC R10).
    func installMainQueueSourceIfNeeded(runningIn mode: Mode) {
        guard isMain, cloop_is_main_thread() else { return }
        let needed = lock.withLock { () -> Bool in
            guard !state.servesMainQueue, !state.lifecycle.isEnded, state.commonModes.contains(mode) else {
                return false
            }
            state.servesMainQueue = true
            return true
        }
        guard needed else { return }
        let handle = cloop_dispatch_main_queue_handle()
        let source = LoopDescriptorSource(descriptor: handle, events: .readable, order: Int.min) { _, _ in
            _ = cloop_eventfd_drain(handle)  // reset first, or the loop spins on a readable eventfd
            cloop_dispatch_drain_main_queue()
        }
        do {
            try add(source, forMode: .common)
        } catch {
            fatalError("Loop.main: cannot watch the main dispatch queue's handle \(handle): \(error)")
        }
    }
}
