import CLoopRuntimeShims

#if canImport(Glibc)
    import Glibc
#endif

/// The identity of the thread a loop belongs to, with what error messages need to name it.
struct ThreadIdentity: Sendable {
    /// The thread's token (`cloop_thread_token`): unique for the life of the process. A `pthread_t`
    /// is not — glibc hands a finished thread's to the next one — so a loop that outlived its
    /// thread would otherwise take a new thread for its own.
    let token: UInt64
    /// The kernel thread id, for messages.
    let tid: Int32
    /// The thread's name when the loop was made (`pthread_getname_np`), for messages.
    let name: String

    /// The calling thread.
    static var current: ThreadIdentity {
        ThreadIdentity(token: cloop_thread_token(), tid: cloop_gettid(), name: currentThreadName())
    }

    /// The process's main thread, whichever thread asks.
    static var main: ThreadIdentity {
        ThreadIdentity(token: 1, tid: getpid(), name: "main")  // the main thread's token (shims.c)
    }

    /// True when called on this thread. Cheap: one thread-local load.
    @inline(__always)
    var isCurrent: Bool { cloop_thread_token() == token }

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
