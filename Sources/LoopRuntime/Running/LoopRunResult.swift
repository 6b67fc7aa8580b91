extension Loop {
    /// Why a run call returned (SPEC R8, R14).
    ///
    /// - Important: A value type; safe from any thread.
    public enum RunResult: Sendable, Hashable, CustomStringConvertible {
        /// The mode was empty (or became empty): nothing could ever wake it (SPEC R10).
        case finished
        /// ``Loop/stop()`` stopped this run call (SPEC R66).
        case stopped
        /// The run's deadline passed (SPEC R12, R13).
        case timedOut
        /// A source was handled and the run was asked to return after one (SPEC R14, R15).
        case handledSource

        /// The result's name.
        public var description: String {
            switch self {
            case .finished: "finished"
            case .stopped: "stopped"
            case .timedOut: "timedOut"
            case .handledSource: "handledSource"
            }
        }
    }
}
