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

    /// Creates an error for `call` failing with `errno`.
    public init(call: String, errno: Int32) {
        self.call = call
        self.errno = errno
    }

    /// `"<call> failed: <strerror> (errno <n>)"`.
    public var description: String {
        "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))"
    }
}
