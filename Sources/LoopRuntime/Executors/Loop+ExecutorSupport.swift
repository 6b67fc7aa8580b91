// What the LoopExecutor module needs from a loop beyond its public API (`package` access: the
// package's other modules only): shared per-loop objects, and where the loop is. The lifecycle hooks it
// uses (`addEndHandler`, `holdSeal`) live with the lifecycle, in Loop+Lifecycle.swift.

extension Loop {
    /// An object attached to this loop under `key`, made by `make` the first time. Support for the
    /// `LoopExecutor` module (one shared executor per loop and mode list, so that actors pinned to
    /// the same loop do not hop between them). The loop holds attachments weakly.
    ///
    /// - Important: Safe from any thread.
    package func attachment<Object: AnyObject & Sendable>(
        for key: [Mode], make: () -> Object, discard: (Object) -> Void = { _ in }
    ) -> Object {
        // `make` runs outside the lock (it may register a job queue, which takes it). When two
        // threads race, the loser's object is handed to `discard`. The table holds its objects
        // weakly: an attachment lives while someone uses it, and a later call makes a new one.
        if let existing = lock.withLock({ state.attachments[key]?.object }) as? Object { return existing }
        let made = make()
        let winner: Object = lock.withLock {
            if let existing = state.attachments[key]?.object as? Object { return existing }
            if state.lifecycle.acceptsWork { state.attachments[key] = WeakObject(object: made) }
            return made
        }
        if winner !== made { discard(made) }
        return winner
    }
}

extension Loop {
    /// The modes of the executor job queue whose batch the calling code runs in, if it runs in one
    /// of this loop's job batches; `nil` otherwise (also off the loop's thread). Support for the
    /// async calls that would wait for ever when their caller cannot run in the mode they wait in.
    ///
    /// - Important: Safe from any thread.
    package var runningJobQueueModes: [Mode]? {
        guard isCurrentThread else { return nil }
        return confined.runningJobQueue?.takeUnretainedValue().modes
    }

    /// True if a run call of this loop has ever been made (on its thread: the loop only runs
    /// there). Support for the async waits that trap on a loop nobody runs.
    ///
    /// - Important: Call on the loop's thread.
    package var hasEverRun: Bool { confined.hasRun }
}
