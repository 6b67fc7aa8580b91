extension Loop {
    /// The moments of a run at which observers are notified (SPEC D).
    ///
    /// A run call notifies ``entry`` once first and ``exit`` once last (SPEC R17). Every pass
    /// notifies ``beforeTimers`` and ``beforeSources`` at its top (SPEC R20), and the pair
    /// ``beforeWaiting``/``afterWaiting`` around a wait that may block (SPEC R21).
    ///
    /// The raw values are CFRunLoop's, so traces line up with Apple's documentation.
    ///
    /// - Important: A value type; safe from any thread.
    public struct Activity: OptionSet, Hashable, Sendable, CustomStringConvertible {
        // The constants are inlinable computed properties rather than stored `static let`s, so
        // that an observer in another module tests its activity against a constant instead of
        // calling a lazy global's accessor at every notification.

        /// The activity bits.
        public let rawValue: UInt32

        /// Creates an activity set from its bits.
        @inlinable
        public init(rawValue: UInt32) {
            self.rawValue = rawValue
        }

        /// A run call is starting (`E`).
        @inlinable public static var entry: Activity { Activity(rawValue: 1 << 0) }
        /// A pass is about to check timers (`BT`); it does not mean a timer will fire.
        @inlinable public static var beforeTimers: Activity { Activity(rawValue: 1 << 1) }
        /// A pass is about to perform signalled sources (`BS`).
        @inlinable public static var beforeSources: Activity { Activity(rawValue: 1 << 2) }
        /// The loop is about to wait and may block (`BW`).
        @inlinable public static var beforeWaiting: Activity { Activity(rawValue: 1 << 5) }
        /// The loop has finished waiting (`AW`).
        @inlinable public static var afterWaiting: Activity { Activity(rawValue: 1 << 6) }
        /// A run call is ending (`X`).
        @inlinable public static var exit: Activity { Activity(rawValue: 1 << 7) }
        /// Every activity.
        @inlinable public static var allActivities: Activity {
            [.entry, .beforeTimers, .beforeSources, .beforeWaiting, .afterWaiting, .exit]
        }

        /// The SPEC notation of the activities, e.g. `E`, `BT`, or `[BW, AW]` for several.
        public var description: String {
            let names: [(Activity, String)] = [
                (.entry, "E"), (.beforeTimers, "BT"), (.beforeSources, "BS"),
                (.beforeWaiting, "BW"), (.afterWaiting, "AW"), (.exit, "X"),
            ]
            let present = names.filter { contains($0.0) }.map(\.1)
            return present.count == 1 ? present[0] : "[" + present.joined(separator: ", ") + "]"
        }
    }
}
