import CLoopRuntimeShims

#if canImport(Glibc)
    import Glibc
#endif

/// A joinable POSIX thread running a closure.
///
/// `join()` (or `detach()`) must be called exactly once (by one thread); until then the thread's resources are
/// held, which is what lets tests and `LoopThread` prove no thread is left behind.
final class PlatformThread: @unchecked Sendable {
    // `handle` is written once by `spawn` before the object is shared; `join` is called once.
    private var handle = pthread_t()

    private final class Start {
        let name: String?
        let body: () -> Void
        init(name: String?, body: @escaping () -> Void) {
            self.name = name
            self.body = body
        }
    }

    private init() {}

    /// Starts a thread named `name` (the kernel keeps 15 bytes) running `body`.
    ///
    /// - Throws: ``LoopSystemError`` for `pthread_create` (e.g. `EAGAIN`: too many threads).
    static func spawn(name: String? = nil, _ body: @escaping @Sendable () -> Void) throws(LoopSystemError)
        -> PlatformThread
    {
        let thread = PlatformThread()
        // +1 handed to the new thread, which takes it back; released here if the thread is never made.
        let start = Unmanaged.passRetained(Start(name: name, body: body)).toOpaque()
        let result = pthread_create(
            &thread.handle, nil,
            { raw in
                let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
                if let name = start.name { _ = cloop_set_current_thread_name(PlatformThread.kernelName(name)) }
                start.body()
                return nil
            }, start)
        guard result == 0 else {
            Unmanaged<Start>.fromOpaque(start).release()
            throw LoopSystemError(call: "pthread_create", errno: result)
        }
        return thread
    }

    /// The name the kernel keeps for a thread named `name`: at most 15 bytes. A longer name is cut,
    /// but a trailing `-<number>` (a `LoopThreadGroup` thread's index) is kept, so that the threads
    /// of one group stay apart in `top`, `gdb` and `/proc`: `default-executor-12` becomes
    /// `default-exec-12`.
    static func kernelName(_ name: String) -> String {
        let limit = 15
        guard name.utf8.count > limit else { return name }
        var suffix = Substring("")
        if let dash = name.lastIndex(of: "-") {
            let digits = name[name.index(after: dash)...]
            if !digits.isEmpty && digits.allSatisfy(\.isASCII) && digits.allSatisfy(\.isNumber)
                && digits.utf8.count + 1 < limit
            {
                suffix = name[dash...]
            }
        }
        let room = limit - suffix.utf8.count
        var head = ""
        for scalar in name.unicodeScalars {
            guard head.utf8.count + String(scalar).utf8.count <= room else { break }
            head.unicodeScalars.append(scalar)
        }
        if !suffix.isEmpty {
            while let last = head.last, "-_. ".contains(last) { head.removeLast() }  // no "group--0"
        }
        return head + suffix
    }

    /// Waits for the thread to end.
    func join() {
        let result = pthread_join(handle, nil)
        precondition(result == 0, "LoopRuntime: pthread_join failed with error \(result)")
    }

    /// Lets the thread release its resources by itself when it ends (instead of `join`).
    func detach() {
        let result = pthread_detach(handle)
        precondition(result == 0, "LoopRuntime: pthread_detach failed with error \(result)")
    }
}
