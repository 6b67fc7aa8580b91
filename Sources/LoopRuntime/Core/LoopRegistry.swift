#if canImport(Glibc)
    import Glibc
#endif

/// Where loops live: the main loop, and each other thread's loop in a pthread key whose destructor
/// tears the loop down when the thread exits (SPEC R1, R2, R5).
enum LoopRegistry {
    /// Holds a +1 reference to the thread's loop; the destructor consumes it.
    static let key: pthread_key_t = {
        var key = pthread_key_t()
        let result = pthread_key_create(&key) { raw in
            guard let raw else { return }
            // Consumes the +1 reference the key was given when the loop was made (`loopForCurrentThread(waiter:)`).
            let loop = Unmanaged<Loop>.fromOpaque(raw).takeRetainedValue()
            loop.tearDown()
        }
        precondition(result == 0, "LoopRuntime: pthread_key_create failed with error \(result)")
        return key
    }()

    static let mainLoop: Loop = {
        do {
            return Loop(owner: .main, waiter: try EpollWaiter(), isMain: true)
        } catch {
            fatalError("Loop.main: cannot create the main loop: \(error)")
        }
    }()

    /// The calling (non-main) thread's loop, created on first use.
    static func loopForCurrentThread() throws(LoopSystemError) -> Loop {
        if let raw = pthread_getspecific(key) {
            return Unmanaged<Loop>.fromOpaque(raw).takeUnretainedValue()
        }
        return try loopForCurrentThread(waiter: EpollWaiter())
    }

    /// Makes a loop driven by `waiter` the calling thread's loop; the thread has none yet.
    static func loopForCurrentThread(waiter: any LoopWaiter) -> Loop {
        precondition(pthread_getspecific(key) == nil, "LoopRegistry: this thread already has a loop.")
        let loop = Loop(owner: .current, waiter: waiter)
        pthread_setspecific(key, Unmanaged.passRetained(loop).toOpaque())
        return loop
    }
}
