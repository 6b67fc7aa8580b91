/// The loop has ended — or stopped accepting work, its `LoopThread` shutting down — so what was
/// asked of it will never happen: a sleep, a submitted body, a port message, a test loop's advance.
///
/// The one error that says so. Calls that have their own error type tell it with a case of their
/// own (``LoopThreadError/shutDown(thread:)``, ``LoopPort/SendError/loopEnded(loop:)``, and
/// LoopTesting's `TestLoopError.ended`), and each of those converts to this one
/// (``LoopEndedErrorConvertible``), so one check covers every way a loop's end is told:
///
/// ```swift
/// do {
///     try thread.perform { … }
///     try await thread.loop.sleep(for: .seconds(1))
/// } catch {
///     if let ended = LoopEndedError(error) { log.info("\(ended)") } else { throw error }
/// }
/// ```
///
/// (`Loop.perform(_:)` answers `false` instead: it is the allocation-free fast path.)
///
/// - Important: A value type; safe from any thread.
public struct LoopEndedError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Why a loop ended.
    ///
    /// - Important: A value type; safe from any thread.
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        /// Its `LoopThread` was shut down (`shutdown()` was called).
        case shutDown
        /// Its `LoopThread` was released: no handle and no executor of it was left.
        case released
        /// Its thread exited (a loop of a thread the program runs itself).
        case threadExited

        /// `its LoopThread was shut down`, `… was released`, `its thread has exited`.
        public var description: String {
            switch self {
            case .shutDown: "its LoopThread was shut down"
            case .released: "its LoopThread was released (no LoopThread handle or executor was left)"
            case .threadExited: "its thread has exited"
            }
        }
    }

    /// The loop's description, e.g. `loop of thread 'worker' (tid 12)`.
    public let loop: String
    /// Why the loop ended; `nil` when the call that told it did not know (an error converted from
    /// a ``LoopThreadError`` or a port's ``LoopPort/SendError``, or made with ``init(loop:reason:)``
    /// without one).
    public let reason: Reason?

    /// Creates the error for `loop` (its description) and `reason`.
    public init(loop: String, reason: Reason? = nil) {
        self.loop = loop
        self.reason = reason
    }

    /// The loop's end that `error` tells, if it tells one: a `LoopEndedError` itself, or an error
    /// that converts to one (``LoopEndedErrorConvertible``); `nil` for any other error.
    public init?(_ error: any Error) {
        guard let ended = (error as? any LoopEndedErrorConvertible)?.loopEndedError else { return nil }
        self = ended
    }

    /// `the <loop> has ended: <reason>`.
    public var description: String {
        guard let reason else { return "the \(loop) has ended (its thread exited or its LoopThread shut down)" }
        return "the \(loop) has ended: \(reason)"
    }
}

/// An error that may tell that a loop ended: ``LoopEndedError/init(_:)`` recognizes it.
///
/// - Important: Conforming types are value types; safe from any thread.
public protocol LoopEndedErrorConvertible: Error {
    /// The loop's end this error tells, or `nil` if it tells something else.
    var loopEndedError: LoopEndedError? { get }
}

extension LoopEndedError: LoopEndedErrorConvertible {
    /// The error itself.
    public var loopEndedError: LoopEndedError? { self }
}

extension LoopThreadError: LoopEndedErrorConvertible {
    /// ``shutDown(thread:)`` as a ``LoopEndedError`` (reason ``LoopEndedError/Reason/shutDown``).
    public var loopEndedError: LoopEndedError? {
        switch self {
        case .shutDown(let thread): LoopEndedError(loop: "loop of LoopThread '\(thread)'", reason: .shutDown)
        }
    }
}

extension LoopHostingError: LoopEndedErrorConvertible {
    /// ``ended`` as a ``LoopEndedError`` (the error does not name its loop: "a hosted loop");
    /// `nil` for the others, which are about the hosting, not the loop's end.
    public var loopEndedError: LoopEndedError? {
        switch self {
        case .ended: LoopEndedError(loop: "a hosted loop")
        case .alreadyHosted, .running, .driven, .noDescriptor: nil
        }
    }
}

extension LoopPort.SendError: LoopEndedErrorConvertible {
    /// ``loopEnded(loop:)`` as a ``LoopEndedError``; `nil` for ``invalidated``.
    public var loopEndedError: LoopEndedError? {
        switch self {
        case .invalidated: nil
        case .loopEnded(let loop): LoopEndedError(loop: loop)
        }
    }
}

extension Loop {
    /// The error for this loop's end, with its reason if it has ended or is draining (`nil`
    /// otherwise: the caller found it refusing work before the lifecycle said why).
    package var endedError: LoopEndedError {
        LoopEndedError(loop: description, reason: lock.withLock { state.lifecycle.reason?.publicReason })
    }
}

extension LoopEndReason {
    /// The reason as the public error tells it.
    var publicReason: LoopEndedError.Reason {
        switch self {
        case .shutDown: .shutDown
        case .released: .released
        case .threadExited: .threadExited
        }
    }
}
