import LoopRuntime

/// The loop's thread ended (its loop was torn down) while an async operation waited on it: a
/// sleep, a tick sequence's timer. The operation will never complete otherwise.
///
/// - Important: A value type; safe from any thread.
public struct LoopEndedError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The loop's description, e.g. `loop of thread 'worker' (tid 12)`.
    public let loop: String

    /// Creates the error for `loop`.
    public init(loop: String) {
        self.loop = loop
    }

    /// `the <loop> has ended`.
    public var description: String { "the \(loop) has ended (its thread exited or its LoopThread shut down)" }
}
