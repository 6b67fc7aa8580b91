// The lane directory of a `LoopGroupExecutor`: how its loops find work another loop is stuck
// behind, and watch each other's delayed jobs (ExperimentalExecutorHooks trait).
#if ExperimentalExecutorHooks && compiler(>=6.3)
    import LoopRuntime
    import Synchronization

    #if canImport(Glibc)
        import Glibc
    #endif

    extension LoopGroupExecutor {
        /// Every lane, for the spinners that take work from the others. Immutable.
        final class LaneDirectory: Sendable {
            let lanes: [Lane]
            init(_ lanes: [Lane]) { self.lanes = lanes }

            /// Starts `thief`'s watch of the other lanes' progress, as it runs out of jobs. A lane
            /// that has started no job since `thief` last looked keeps the date it was last seen to
            /// start one if `thief` has not blocked since (it ran the jobs it took from that lane,
            /// say: it takes the next ones at once, not 20 µs later); after a block, every date
            /// starts now. On `thief`'s loop thread.
            func beginWatch(by thief: Lane, at now: ContinuousClock.Instant) {
                var keep = thief.recordIsFresh
                if thief.seenRan.count != lanes.count {
                    thief.seenRan = Array(repeating: 0, count: lanes.count)
                    thief.seenAt = Array(repeating: now, count: lanes.count)
                    keep = false
                }
                for index in lanes.indices {
                    let ran = lanes[index].load.ran.load(ordering: .relaxed)
                    if !keep || ran != thief.seenRan[index] {
                        thief.seenRan[index] = ran
                        thief.seenAt[index] = now
                    }
                }
                thief.recordIsFresh = true
            }

            /// Moves to `thief`'s queue the oldest jobs of a lane that has jobs waiting and has not
            /// started one for `stuckAfter` (it runs a long job: its waiting jobs would wait for it);
            /// true if any moved. On `thief`'s loop thread, after `beginWatch`.
            func stealFromStuck(into thief: Lane, at now: ContinuousClock.Instant) -> Bool {
                guard thief.seenRan.count == lanes.count else { return false }  // no watch begun yet
                var victim: Lane?
                var most = 0
                for index in lanes.indices where lanes[index] !== thief {
                    let load = lanes[index].load
                    let ran = load.ran.load(ordering: .relaxed)
                    if ran != thief.seenRan[index] {
                        thief.seenRan[index] = ran
                        thief.seenAt[index] = now
                        continue
                    }
                    guard now - thief.seenAt[index] >= LoopGroupExecutor.stuckAfter else { continue }
                    let depth = load.depth.load(ordering: .relaxed)
                    if depth > most {
                        victim = lanes[index]
                        most = depth
                    }
                }
                guard let victim else { return false }
                let wanted = min(LoopGroupExecutor.stealLimit, max(1, most / 2))
                // The thief's count first: the moved jobs run on its loop (after this callout) and
                // count themselves down there.
                thief.load.depth.add(wanted, ordering: .relaxed)
                let moved = victim.queue.moveOldest(upTo: wanted, to: thief.queue)
                thief.load.depth.subtract(wanted - moved, ordering: .relaxed)
                victim.load.depth.subtract(moved, ordering: .relaxed)
                return moved > 0
            }

            /// Moves to `thief`'s queue the delayed jobs of the other lanes that are overdue by
            /// `timerStealAfter` on a loop that is running (not blocked in the kernel, where its
            /// own timer would wake it): that loop is busy and cannot fire them. True if any moved.
            /// On `thief`'s loop thread.
            func stealOverdue(into thief: Lane, at now: Int64) -> Bool {
                let cutoff = now - LoopGroupExecutor.timerStealAfterNanoseconds
                var moved = 0
                for lane in lanes where lane !== thief && !lane.load.blocked.load(ordering: .relaxed) {
                    moved += lane.delayedJobs.takeOverdue(dueBy: cutoff) { jobs, owner in
                        thief.load.depth.add(jobs.count, ordering: .relaxed)
                        guard thief.queue.enqueue(contentsOf: jobs, keeping: owner) else {
                            thief.load.depth.subtract(jobs.count, ordering: .relaxed)
                            return false
                        }
                        return true
                    }
                }
                return moved > 0
            }

            /// Sets `thief`'s watch, as it is about to block, for the lanes that are running: for
            /// their delayed jobs, the first one's deadline plus `timerStealAfter` — for a lane
            /// that started no job during the spin (stuck), or else no sooner than `timerRecheck`
            /// from now, so that a loop busy with short jobs costs its idle neighbour at most one
            /// wake-up per `timerRecheck`; and for a lane with jobs waiting, `timerRecheck` from
            /// now, to see whether it is stuck then (the wake-up a lane sends when it queues a
            /// second job can come while this loop still spins, too early to see a long job that
            /// starts after it). No such lane: the watch is put away. On `thief`'s loop thread,
            /// after `beginWatch`.
            func setWatch(of thief: Lane, at now: ContinuousClock.Instant) {
                let nanoseconds = now.loopNanoseconds
                var due = Int64.max
                for index in lanes.indices where lanes[index] !== thief {
                    let lane = lanes[index]
                    guard !lane.load.blocked.load(ordering: .relaxed) else { continue }
                    if lane.load.depth.load(ordering: .relaxed) > 0 {
                        due = min(due, nanoseconds + LoopGroupExecutor.timerRecheckNanoseconds)
                    }
                    let earliest = lane.delayedJobs.earliestDeadline
                    guard earliest != .max else { continue }
                    let stuck =
                        lane.load.ran.load(ordering: .relaxed) == thief.seenRan[index]
                        && now - thief.seenAt[index] >= LoopGroupExecutor.stuckAfter
                    var at = earliest + LoopGroupExecutor.timerStealAfterNanoseconds
                    if !stuck { at = max(at, nanoseconds + LoopGroupExecutor.timerRecheckNanoseconds) }
                    due = min(due, at)
                }
                // Only sooner: a running lane may have made it its deputy since it put its watch
                // away (`putAwayWatch`), for a sleep this look did not see.
                let pause = LoopGroupExecutor.pauseBeforeLook.load(ordering: .relaxed)
                if pause > 0 { usleep(pause) }
                move(thief, to: due, onlyEarlier: true)
            }

            /// A job from a thread outside the group went to `busy`, a lane that is running a job (not
            /// spinning, not blocked), as the only one waiting there: if that job is a long one,
            /// only another loop can take it, so a lane blocked in the kernel looks within
            /// `deputyHorizon` (its watch; `stealFromStuck` takes the job then if `busy` has
            /// started none since). Not sooner: an answer from a pinned actor often comes back to
            /// a lane that has not reached its spin yet, and a neighbour woken for each would spin
            /// and draw the next answers to itself (a 1 ms horizon made that round trip 2.5×
            /// slower); with 10 ms it costs nothing measurable. Safe from any thread.
            func watchForOutsideJob(on busy: Lane) {
                for lane in lanes where lane !== busy && lane.load.blocked.load(ordering: .sequentiallyConsistent) {
                    let at = ContinuousClock.now.loopNanoseconds + LoopGroupExecutor.deputyHorizonNanoseconds
                    // Sooner already (its own look, a deputy's, or the last outside job's).
                    if lane.watchSoonest.load(ordering: .relaxed) <= at { return }
                    move(lane, to: at, onlyEarlier: true)
                    return
                }
            }

            /// Puts `lane`'s watch away, as it is about to raise its blocked flag: `setWatch` sets
            /// it again after the flag, for what it then sees. On `lane`'s thread.
            func putAwayWatch(of lane: Lane) { move(lane, to: .max) }

            /// Called on `lane`'s thread while it runs with delayed jobs (after it woke, after it
            /// scheduled one; `now` in loop time): makes sure a lane blocked in the kernel wakes if
            /// the first one is `timerStealAfter` overdue — this lane may be held by a long job by
            /// then, and only another loop can take them (see `stealOverdue`) — but no sooner than
            /// `deputyHorizon` from now: a lane that goes back to sleep within that time (the common
            /// case: it fires its due timers, runs what they woke and blocks) puts the watch back
            /// before it fires, and its neighbour is not woken.
            func appointDeputy(for lane: Lane, now: @autoclosure () -> Int64) {
                let earliest = lane.delayedJobs.earliestDeadline
                guard earliest != .max else { return }
                // Pairs with the fence of a lane about to block (between its flag and its look at
                // this lane's sleeps): one of the two sees the other.
                atomicMemoryFence(ordering: .sequentiallyConsistent)
                let now = now()
                let at = max(
                    earliest + LoopGroupExecutor.timerStealAfterNanoseconds,
                    now + LoopGroupExecutor.deputyHorizonNanoseconds)
                guard at < lane.deputyAt else { return }
                if let deputy = lane.deputy, deputy.load.blocked.load(ordering: .relaxed) {
                    move(deputy, to: at, onlyEarlier: true)
                    lane.deputyAt = at
                    return
                }
                for other in lanes where other !== lane && other.load.blocked.load(ordering: .relaxed) {
                    move(other, to: at, onlyEarlier: true)
                    lane.deputy = other
                    lane.deputyAt = at
                    return
                }
            }

            /// `lane` blocks: it fires its own timers, so the watch it set on its deputy goes —
            /// unless the deputy has set it since. On `lane`'s thread.
            func releaseDeputy(of lane: Lane) {
                guard let deputy = lane.deputy else { return }
                let at = lane.deputyAt
                lane.deputy = nil
                lane.deputyAt = .max
                // Only the date this lane set: the deputy may have set its own since.
                deputy.watchAt.withLock { current in
                    guard current == at else { return }
                    current = .max
                    deputy.watchSoonest.store(.max, ordering: .relaxed)
                    deputy.watch.setFireDate(LoopGroupExecutor.never)
                }
            }

            /// Moves `lane`'s watch to `date` (loop time; `Int64.max`: away) if it is not there —
            /// with `onlyEarlier`, only if that is sooner. The date and the timer change together,
            /// under the lane's `watchAt` lock: two lanes moving one watch at once (its own spinner
            /// and a running lane that makes it its deputy) cannot leave the timer at one date and
            /// `watchAt` at another, which would make every later move think it has nothing to do.
            private func move(_ lane: Lane, to date: Int64, onlyEarlier: Bool = false) {
                lane.watchAt.withLock { current in
                    guard current != date, !onlyEarlier || date < current else { return }
                    current = date
                    lane.watchSoonest.store(date, ordering: .relaxed)
                    lane.watch.setFireDate(
                        date == .max ? LoopGroupExecutor.never : ContinuousClock.Instant(loopNanoseconds: date))
                }
            }
        }
    }
#endif
