extension Loop {
    /// The name of a run loop mode.
    ///
    /// A mode is a name for a set of sources, timers and observers. Running a loop in a mode
    /// services only the items of that mode, so a mode is how a program says "only this kind of
    /// work right now" (a "tracking" mode that keeps a drag smooth, for example). Modes are
    /// compared by name, created on demand the first time an item or block names them, and never
    /// destroyed (SPEC R4). Running a name nobody used is running an empty mode.
    ///
    /// ``common`` is not a mode but a pseudo-mode naming the loop's *common set*: an item added to
    /// ``common`` is added to every mode of the set, now and later (SPEC R62–R64). It can be
    /// used to add and remove items and to target blocks, but it cannot be run (SPEC R9).
    ///
    /// ```swift
    /// extension Loop.Mode {
    ///     static let tracking: Loop.Mode = "tracking"
    /// }
    /// ```
    ///
    /// - Important: A value type; safe from any thread.
    public struct Mode: RawRepresentable, Hashable, Sendable, ExpressibleByStringLiteral,
        CustomStringConvertible
    {
        /// The mode's name. Two modes are the same mode when their names are equal.
        public let rawValue: String

        /// Creates a mode with the given name.
        public init(rawValue: String) {
            self.rawValue = rawValue
        }

        /// Creates a mode with the given name.
        public init(_ name: String) {
            self.rawValue = name
        }

        /// Creates a mode from a string literal: `let tracking: Loop.Mode = "tracking"`.
        public init(stringLiteral name: String) {
            self.rawValue = name
        }

        /// The default mode, in which a loop normally runs. It is always in the common set.
        public static let `default` = Mode("default")

        /// The common-modes pseudo-mode: every mode in the loop's common set (SPEC R62–R64).
        ///
        /// Items added to `.common` are added to every common mode, and blocks targeting `.common`
        /// run in whichever common mode is running. Running `.common` is a programmer error.
        public static let common = Mode("common")

        /// The mode's name.
        public var description: String { rawValue }
    }
}
