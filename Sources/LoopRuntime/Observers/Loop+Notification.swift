extension Loop {
    /// The notification under way: the mode whose observers are called, the number of run calls
    /// in progress (nested runs count), and the loop's reading of its clock in nanoseconds since
    /// `ContinuousClock`'s origin — read after each wait and after each callout of user code,
    /// shared by the activities in between. Support for the activity stream, which stamps its
    /// events with these instead of asking the loop (and the clock) per event.
    ///
    /// - Important: Only on the loop's thread, from an observer's handler.
    @inline(__always)
    package var notification: (mode: Mode, depth: Int, nanoseconds: Int64) {
        guard let mode = confined.notifiedMode else {
            preconditionFailure("Loop.notification: read outside an observer's callout, or off the loop's thread")
        }
        return (mode._withUnsafeGuaranteedRef { $0.mode }, state.runCallCount, confined.now(waiter))
    }
}
