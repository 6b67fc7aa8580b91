// The spellings the public API had before it settled on one dialect: a list of modes is
// `inModes:`, one mode `forMode:`. Each old spelling still compiles, with a warning that names the
// new one, and forwards to it.

extension Loop {
    /// True if `timer` is in `mode`.
    ///
    /// - Important: Safe from any thread.
    @available(*, deprecated, renamed: "contains(_:forMode:)")
    public func contains(_ timer: LoopTimer, inMode mode: Mode) -> Bool {
        contains(timer, forMode: mode)
    }

    /// True if `source` is in `mode`.
    ///
    /// - Important: Safe from any thread.
    @available(*, deprecated, renamed: "contains(_:forMode:)")
    public func contains(_ source: LoopSource, inMode mode: Mode) -> Bool {
        contains(source, forMode: mode)
    }

    /// True if `source` is in `mode`.
    ///
    /// - Important: Safe from any thread.
    @available(*, deprecated, renamed: "contains(_:forMode:)")
    public func contains(_ source: LoopDescriptorSource, inMode mode: Mode) -> Bool {
        contains(source, forMode: mode)
    }

    /// True if `observer` is in `mode`.
    ///
    /// - Important: Safe from any thread.
    @available(*, deprecated, renamed: "contains(_:forMode:)")
    public func contains(_ observer: LoopObserver, inMode mode: Mode) -> Bool {
        contains(observer, forMode: mode)
    }

    /// True if `port` is in `mode`.
    ///
    /// - Important: Safe from any thread.
    @available(*, deprecated, renamed: "contains(_:forMode:)")
    public func contains<Message>(_ port: LoopPort<Message>, inMode mode: Mode) -> Bool {
        contains(port, forMode: mode)
    }

    /// The earliest fire date of the valid timers in `mode`.
    ///
    /// - Important: Safe from any thread.
    @available(*, deprecated, renamed: "nextFireDate(forMode:)")
    public func nextFireDate(in mode: Mode) -> ContinuousClock.Instant? {
        nextFireDate(forMode: mode)
    }

    /// The number of timers in `mode`.
    ///
    /// - Important: Safe from any thread.
    @available(*, deprecated, renamed: "timerCount(forMode:)")
    public func timerCount(in mode: Mode) -> Int {
        timerCount(forMode: mode)
    }

    /// Hands the loop's thread to a host that runs the loop in `mode`.
    ///
    /// - Important: Call on the loop's thread (it traps elsewhere), as
    ///   ``beginHosting(forMode:)``.
    @available(*, deprecated, renamed: "beginHosting(forMode:)")
    public func beginHosting(in mode: Mode) throws(LoopHostingError) -> HostedLoop {
        try beginHosting(forMode: mode)
    }
}
