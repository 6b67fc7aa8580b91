#if canImport(Glibc)
    import Glibc
#endif

/// A system call that LoopRuntime made failed.
///
/// Thrown for failures of the environment (out of file descriptors, a descriptor closed behind the
/// loop's back), never for programmer errors, which trap with a message instead (SPEC M5).
///
/// - Important: A value type; safe from any thread.
public struct LoopSystemError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The system call that failed, e.g. `"epoll_ctl"`.
    public let call: String
    /// The `errno` the call failed with.
    public let errno: Int32
    /// What LoopRuntime was doing, when that says more than the call (e.g. which descriptor).
    public let detail: String?

    /// Creates an error for `call` failing with `errno`.
    public init(call: String, errno: Int32, detail: String? = nil) {
        self.call = call
        self.errno = errno
        self.detail = detail
    }

    /// `"<call> failed: <strerror> (errno <n>)"`, then the detail if any.
    public var description: String {
        let base = "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))"
        return detail.map { "\(base): \($0)" } ?? base
    }
}
