import LoopRuntime

// The spellings the public API had before it settled on one dialect: a list of modes is
// `inModes:`, one mode `forMode:`, and every stream's buffer a `LoopBuffering`. Each old spelling
// still compiles, with a warning that names the new one, and forwards to it.

extension Loop {
    /// Suspends the calling task for `duration`, on this loop's timers.
    ///
    /// - Important: Safe from any task, with the preconditions of
    ///   ``Loop/sleep(for:tolerance:inModes:isolation:)``.
    @available(*, deprecated, renamed: "sleep(for:tolerance:inModes:isolation:)")
    public func sleep(
        for duration: Duration, tolerance: Duration = .zero, modes: [Mode],
        isolation: isolated (any Actor)? = #isolation
    ) async throws {
        try await sleep(for: duration, tolerance: tolerance, inModes: modes, isolation: isolation)
    }

    /// Suspends the calling task until `deadline`, on this loop's timers.
    ///
    /// - Important: Safe from any task, with the preconditions of
    ///   ``Loop/sleep(until:tolerance:inModes:isolation:)``.
    @available(*, deprecated, renamed: "sleep(until:tolerance:inModes:isolation:)")
    public func sleep(
        until deadline: ContinuousClock.Instant, tolerance: Duration = .zero, modes: [Mode],
        isolation: isolated (any Actor)? = #isolation
    ) async throws {
        try await sleep(until: deadline, tolerance: tolerance, inModes: modes, isolation: isolation)
    }

    /// The ticks of a repeating timer on this loop.
    ///
    /// - Important: Safe from any thread; iterate from one task at a time, as
    ///   ``Loop/ticks(every:tolerance:inModes:)``.
    @available(*, deprecated, renamed: "ticks(every:tolerance:inModes:)")
    public func ticks(every interval: Duration, tolerance: Duration = .zero, modes: [Mode]) -> LoopTicks {
        ticks(every: interval, tolerance: tolerance, inModes: modes)
    }

    /// A clock whose sleeps use this loop's timers in `modes`.
    ///
    /// - Important: Safe from any thread.
    @available(*, deprecated, renamed: "clock(inModes:)")
    public func clock(modes: [Mode]) -> LoopClock {
        clock(inModes: modes)
    }

    /// The loop's shared executor for `modes`.
    ///
    /// - Important: Safe from any thread.
    @available(*, deprecated, renamed: "executor(inModes:)")
    public func executor(modes: [Mode]) -> LoopExecutor {
        executor(inModes: modes)
    }

    /// An async sequence of this loop's activities in `modes`.
    ///
    /// - Important: Safe from any thread; iterate from one task at a time, as
    ///   ``Loop/activities(_:inModes:buffering:)``.
    @available(*, deprecated, renamed: "activities(_:inModes:buffering:)")
    public func activities(
        _ activities: Activity = .allActivities, in modes: [Mode],
        buffering: LoopBuffering = .dropOldest(capacity: 1024)
    ) -> LoopActivities {
        self.activities(activities, inModes: modes, buffering: buffering)
    }

    /// An async sequence of stall reports, keeping the newest `bufferingNewest`.
    ///
    /// - Important: Safe from any thread; iterate from one task at a time, as
    ///   ``Loop/stalls(longerThan:buffering:)``.
    @available(*, deprecated, renamed: "stalls(longerThan:buffering:)")
    public func stalls(longerThan threshold: Duration, bufferingNewest: Int) -> LoopStalls {
        stalls(longerThan: threshold, buffering: .dropOldest(capacity: bufferingNewest))
    }
}

extension LoopClock {
    /// A clock sleeping on `loop`'s timers in `modes`.
    ///
    /// - Important: Safe from any thread.
    @available(*, deprecated, renamed: "init(loop:inModes:)")
    public init(loop: Loop, modes: [Loop.Mode]) {
        self.init(loop: loop, inModes: modes)
    }
}

extension LoopExecutor {
    /// Creates an executor of its own on `loop`, for jobs in `modes`.
    ///
    /// - Important: Safe from any thread.
    @available(*, deprecated, renamed: "init(loop:inModes:label:)")
    public convenience init(loop: Loop, modes: [Loop.Mode], label: StaticString? = nil) {
        self.init(loop: loop, inModes: modes, label: label)
    }
}

/// What an activity stream keeps when its consumer falls behind: ``LoopBuffering``.
///
/// - Important: A value: safe from any thread.
@available(*, deprecated, renamed: "LoopBuffering")
public typealias LoopActivityBuffering = LoopBuffering

/// LoopRuntime's `LoopEndedError`, which moved there so that every module tells a loop's
/// end with it: this name keeps code that imports only LoopExecutor compiling.
public typealias LoopEndedError = LoopRuntime.LoopEndedError
