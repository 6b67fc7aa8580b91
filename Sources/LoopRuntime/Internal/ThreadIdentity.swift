import CLoopRuntimeShims

#if canImport(Glibc)
    import Glibc
#endif

/// The identity of the thread a loop belongs to, with what error messages need to name it.
struct ThreadIdentity: @unchecked Sendable {
    // `pthread_t` is an integer on Linux; it is only compared with `pthread_equal`.
    let thread: pthread_t
    /// The kernel thread id, for messages.
    let tid: Int32
    /// The thread's name when the loop was made (`pthread_getname_np`), for messages.
    let name: String

    /// The calling thread.
    static var current: ThreadIdentity {
        ThreadIdentity(thread: pthread_self(), tid: cloop_gettid(), name: currentThreadName())
    }

    /// The process's main thread, whichever thread asks.
    static var main: ThreadIdentity {
        ThreadIdentity(thread: cloop_main_thread(), tid: getpid(), name: "main")
    }

    /// True when called on this thread. Cheap: `pthread_self` reads a register.
    @inline(__always)
    var isCurrent: Bool { pthread_equal(pthread_self(), thread) != 0 }

    /// `'name' (tid N)`, for messages.
    var debugName: String { "'\(name)' (tid \(tid))" }

    /// The calling thread, described for a message.
    static var currentDebugName: String { "'\(currentThreadName())' (tid \(cloop_gettid()))" }

    private static func currentThreadName() -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        guard cloop_current_thread_name(&buffer, buffer.count) == 0 else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
