extension Loop {
    /// A callout or a pass that kept the loop's thread busy longer than a threshold: a report of
    /// LoopExecutor's `stalls(longerThan:)`.
    ///
    /// Measured on the loop's thread, when the stretch ends; only the loop's own work counts —
    /// a callout that runs a nested run (a modal loop) is not charged for the nested run's waits.
    /// The innermost stretch that ran long is reported: a long callout, not also the pass that
    /// held it; a pass only when none of its callouts was long enough alone, and then it names its
    /// longest callout.
    ///
    /// - Important: A value type; safe from any thread.
    public struct Stall: Sendable, CustomStringConvertible {
        /// What ran long.
        public enum Scope: Sendable, Hashable, CustomStringConvertible {
            /// One callout.
            case callout
            /// A pass, made of several shorter callouts and the loop's own work.
            case pass

            /// `callout` or `pass`.
            public var description: String {
                switch self {
                case .callout: "callout"
                case .pass: "pass"
                }
            }
        }

        /// What ran long.
        public let scope: Scope
        /// How long the loop's thread was busy with it.
        public let duration: Duration
        /// The kind of the callout that ran long — for a pass, of its longest callout; `nil` for a
        /// pass without callouts.
        public let culprit: CalloutKind?
        /// The label of that callout, if it has one.
        public let label: StaticString?
        /// The mode being run.
        public let mode: Mode
        /// How many run calls were in progress (1 for an outermost run call).
        public let depth: Int
        let endNanoseconds: Int64
        /// How many reports a stall stream dropped since the previous one it delivered, because
        /// its consumer fell behind (LoopExecutor's `stalls(longerThan:)` sets it): older reports
        /// with `.dropOldest`, newer ones with `.dropNewest`.
        public var dropped = 0

        /// When the stretch ended, on the loop's clock.
        public var end: ContinuousClock.Instant { LoopTime.instant(endNanoseconds) }

        /// `timer "autosave" ran 52.0 ms in default (depth 1)`, or `a pass ran 80.1 ms …`.
        public var description: String {
            let what: String
            switch (scope, culprit) {
            case (.callout, let kind?):
                what = label.map { "\(kind) \"\($0)\"" } ?? "a \(kind) callout"
            case (_, let kind?):
                what = "a pass (longest: \(label.map { "\(kind) \"\($0)\"" } ?? "a \(kind) callout"))"
            case (_, nil):
                what = "a pass"
            }
            return "\(what) ran \(Metrics.Distribution.format(duration)) in \(mode) (depth \(depth))"
        }
    }

    /// Calls `handler` on the loop's thread after each callout or pass that kept it busy longer
    /// than `threshold` (see ``Stall``); returns the token for ``removeStallHandler(_:)``, or `nil`
    /// if the loop has ended. Support for LoopExecutor's `stalls(longerThan:)`: the handler must
    /// return at once and never block.
    ///
    /// - Important: Safe from any thread.
    package func addStallHandler(
        longerThan threshold: Duration, _ handler: @escaping @Sendable (Stall) -> Void
    ) -> UInt64? {
        precondition(threshold > .zero, "Loop.stalls(longerThan:): the threshold must be positive, got \(threshold).")
        return lock.withLock {
            guard !state.lifecycle.isEnded else { return nil }
            // The flag changes under the lock, so that a concurrent removal cannot clear it last.
            turnOnInstrument(InstrumentFlags.stalls)
            return instruments.addStallHandler(LoopTime.nanoseconds(of: threshold), handler)
        }
    }

    /// Removes a handler added by ``addStallHandler(longerThan:_:)``.
    ///
    /// - Important: Safe from any thread.
    package func removeStallHandler(_ token: UInt64) {
        let removed = lock.withLock {
            let (removed, anyLeft) = instruments.removeStallHandler(token)
            if !anyLeft { turnOffInstrument(InstrumentFlags.stalls) }
            return removed
        }
        _ = removed  // released outside the lock: it may hold the last reference to a stream
    }
}
