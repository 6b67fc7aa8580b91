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

/// `Loop.withMode(_:isolation:_:)` did not run its body: before the loop entered the mode, another
/// switch sent it to a different mode.
///
/// - Important: A value type; safe from any thread.
public struct LoopModeSupersededError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The mode the loop did not enter.
    public let mode: Loop.Mode
    /// The loop's description.
    public let loop: String

    /// Creates the error for a switch of `loop` to `mode`.
    public init(mode: Loop.Mode, loop: String) {
        self.mode = mode
        self.loop = loop
    }

    /// `the <loop> did not enter '<mode>': …`.
    public var description: String {
        "the \(loop) did not enter '\(mode.rawValue)': another switch sent it to a different mode first"
    }
}
