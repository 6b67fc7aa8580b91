import LoopRuntime

// The async calls that wait on a loop trap, with a message that says what to do, in the cases
// where their answer could never come — rather than leave the task suspended for ever.

extension Loop {
    /// Traps if the calling task waits on this loop from the loop's own thread, and nothing will
    /// ever run the loop: it is not running, has never run, is not driven, and is not the main
    /// loop (which a program may start running later). That is `Loop.current` on a thread of
    /// Swift's cooperative pool, which never runs its loop. (A thread that will run its loop for
    /// the first time only after such a wait began is the one case this gets wrong.)
    func preconditionSomeoneRunsTheLoop(_ call: StaticString) {
        guard isCurrentThread, self !== Loop.main, driver == nil, !hasEverRun, !isRunning else { return }
        preconditionFailure(
            "\(call): the task runs on the thread of the \(self), and nothing runs that loop (it has never run and is not driven), so the wait would never end (a thread of Swift's cooperative pool never runs its loop; Loop.current there is such a loop). Wait on a loop that runs: a LoopThread's loop, or Loop.main while Loop.runMain runs it; for a plain delay, use Task.sleep."
        )
    }

    /// Traps if the calling code could not run while this loop is in `mode` — an actor (or task)
    /// on one of the loop's executors whose modes do not include `mode`, or the main actor while
    /// the main loop runs a mode outside the common set — because `withMode` then could never
    /// finish: its body would wait for the loop to come back, and only the body brings it back.
    func preconditionCallerRuns(in mode: Mode, isolation: (any Actor)?, _ call: StaticString) {
        guard isCurrentThread else { return }  // code on another thread is not paused by the mode
        if let modes = runningJobQueueModes, !runs(modes, in: mode) {
            preconditionFailure(
                "\(call) was called with \"\(mode.rawValue)\" from code running on an executor of the \(self) whose modes are \(modes.map(\.rawValue)): that code cannot run while the loop is in \"\(mode.rawValue)\", so the body could never run and the loop never switch back. Add \"\(mode.rawValue)\" to the executor's modes, make it a common mode (addCommonMode), or call from a task that is not isolated to the loop."
            )
        }
        if self === Loop.main, let isolation, isolation === MainActor.shared, !commonModes.contains(mode) {
            preconditionFailure(
                "\(call) was called with \"\(mode.rawValue)\" on the main loop from the main actor: the main actor runs only in the main loop's common modes, so the body could never run and the loop never switch back. Make \"\(mode.rawValue)\" a common mode first (Loop.main.addCommonMode), or call from a task that is not isolated to the main actor."
            )
        }
    }

    /// True if jobs for `modes` may run while the loop runs `mode`.
    private func runs(_ modes: [Mode], in mode: Mode) -> Bool {
        modes.contains(mode) || (modes.contains(.common) && commonModes.contains(mode))
    }
}
