import LoopRuntime

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
