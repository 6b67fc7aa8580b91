// The loop-timer side of the ExperimentalExecutorHooks trait: jobs handed to an executor with a
// delay (`SchedulingExecutor`, which is how `Task.sleep` reaches an executor) wait in one-shot
// loop timers. No SPI here: the SPI conformances are in the other files of this folder.
#if ExperimentalExecutorHooks && compiler(>=6.3)
    import LoopRuntime
    import Synchronization

    /// The delayed jobs of one executor on one loop: each waits in a one-shot `LoopTimer` in the
    /// executor's modes, then goes to the executor's queue like any job.
    ///
    /// **Cancellation.** `Task.sleep` hands the executor a small wake-up job, not the sleeping task,
    /// and on cancellation it resumes the sleeper at once and leaves the wake-up job to run at the
    /// deadline (where it finds nothing to do). So a cancelled sleep would keep its loop timer — and
    /// its wake-up — until the deadline. The table remembers the address of the task that scheduled
    /// each job (the sleeper: `enqueue(_:at:…)` runs inside it; a task's job is the task). When
    /// that task is enqueued on the executor while its job still waits, nothing but a cancellation
    /// can have resumed it: the timer goes at once and the wake-up job runs now. Two cases are not
    /// seen, and their timer stays until the deadline (or the same task's next sleep here), which
    /// is harmless but for the memory: a sleeper resumed onto another executor, and a cancellation
    /// that lands in the instant between the job's arrival here and its task's suspension — the
    /// standard library then lets the task go on inline without suspending, so it never comes back.
    /// Only the address is kept: an `UnsafeCurrentTask` must not outlive `withUnsafeCurrentTask`.
    ///
    /// **The way back.** A sleep's wake-up job is a small task that hops to the generic executor
    /// first (Swift's global pool, or the default executor when `LoopExecutorFactory` installed
    /// one) and resumes the sleeper from there; the sleeper then hops to the executor it prefers.
    /// So the sleeper arrives here some time after its job ran. From the wake-up until that
    /// arrival the table holds the loop's seal (`Loop.holdSeal(for:)`): a shutdown does not end
    /// the loop before the sleeper is back (its enqueue would trap), and a test loop is not idle
    /// while a woken task is on its way. That way back is the runtime's, through the generic
    /// executor: if no thread of it is free (the only free one blocked in a synchronous
    /// `shutdown()`), the drain's bound on holds ends the wait with a trap naming "Task.sleep".
    ///
    /// **The loop's end.** When the loop stops accepting items, every waiting job runs at once:
    /// pending sleeps return early, without an error (the SPI has no way to make one sleep throw
    /// but cancelling its whole task, and a library must not cancel tasks that only happened to
    /// sleep). A sleep *begun* on a loop that no longer accepts items is refused the only way
    /// `Task.sleep` can be: its task — the current one — is cancelled, and the sleep throws
    /// `CancellationError`; so a task that sleeps between rounds of work winds down instead of
    /// spinning on a loop that is going away.
    ///
    /// **Overdue jobs elsewhere.** A table made `stealable` (a `LoopGroupExecutor` lane's) also
    /// keeps its jobs in deadline order, so that another loop of the group can take the jobs whose
    /// time has come while this loop is busy with a long job and cannot fire their timers
    /// (``takeOverdue(dueBy:into:)``). Whoever takes an entry first — the timer's callout or the
    /// other loop — runs it; the other finds nothing.
    ///
    /// - Important: Safe from any thread; the timers fire on the loop's thread.
    final class DelayedJobs: Sendable {
        /// The task that scheduled a job, by address: matched against the jobs the executor is
        /// handed (a task's job is the task). Never dereferenced.
        private struct Scheduler: Sendable {
            let address: UInt
        }

        private struct Entry: Sendable {
            let timer: LoopTimer
            let job: UnownedJob
            /// The deadline, in loop time (kept in order only by a stealable table).
            let deadline: Int64
            let scheduler: Scheduler?
            /// The executor, kept alive while its job waits.
            let owner: AnyObject & Sendable
        }

        private struct State {
            var entries: [UInt64: Entry] = [:]
            /// Entries by the address of the task that scheduled them.
            var byScheduler: [UInt: UInt64] = [:]
            /// Tasks whose wake-up job went to the queue and that have not come back yet, each
            /// with the loop's seal held for it (by address), and the executor they come back to,
            /// kept alive until then: a task's executor preference does not keep the executor
            /// alive, and the task arrives through the global pool. (A task that never comes back
            /// here — resumed onto another executor — is forgotten when the loop ends.)
            var returning: [UInt: AnyObject & Sendable] = [:]
            /// The loop's end handler, once registered (at the first delayed job: an executor that
            /// never gets one costs its loop nothing); `ended` once it ran.
            var endHandler: UInt64?
            var ended = false
            /// A stealable table's entries in deadline order; an entry taken out by its timer, a
            /// cancellation or another loop stays here until it reaches the top (or the heap is
            /// rebuilt from `entries` when such places outnumber live ones).
            var order = DeadlineHeap()
        }

        let loop: Loop
        let modes: [Loop.Mode]
        /// Where a job goes when its time comes: the executor's queue.
        private let enqueue: @Sendable (UnownedJob) -> Void
        private let state = ExecutorLocked(State())
        /// The number of entries with a scheduler: every enqueue of the executor reads it (one
        /// relaxed load when no sleep waits).
        private let tracked = Atomic<Int>(0)
        private let nextID = Atomic<UInt64>(0)
        /// The end handler was registered (or could not be): later jobs skip the check's lock.
        private let endHandled = Atomic<Bool>(false)
        /// Keeps entries in deadline order for other loops (see "Overdue jobs elsewhere").
        let isStealable: Bool
        /// A stealable table's earliest deadline, in loop time (`Int64.max`: none). Read without
        /// the lock by the other loops of the group; never later than the earliest live entry's
        /// deadline (it may be earlier, for an entry already gone).
        private let earliest = Atomic<Int64>(.max)

        init(
            loop: Loop, modes: [Loop.Mode], stealable: Bool = false,
            enqueue: @escaping @Sendable (UnownedJob) -> Void
        ) {
            self.loop = loop
            self.modes = modes
            self.isStealable = stealable
            self.enqueue = enqueue
        }

        deinit {
            if let token = state.withLock({ $0.endHandler }) { loop.removeEndHandler(token) }
        }

        /// The number of jobs waiting for their time.
        var count: Int { state.withLock { $0.entries.count } }

        /// Puts `job` in a one-shot timer at `deadline` (the loop's clock) with `tolerance`, keeping
        /// `owner` (the executor) alive until the job has gone to its queue.
        func schedule(
            _ job: UnownedJob, at deadline: ContinuousClock.Instant, tolerance: Duration,
            keeping owner: AnyObject & Sendable
        ) {
            let scheduler: Scheduler? = withUnsafeCurrentTask { task in
                task.map { Scheduler(address: unsafeBitCast($0, to: UInt.self)) }
            }
            if !endHandled.load(ordering: .acquiring) { registerEndHandler() }
            let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
            // No label: a label costs a timer an allocation of its own, one more per sleep.
            let timer = LoopTimer(fireAt: deadline, tolerance: max(.zero, tolerance)) { _ in
                self.fire(id)
            }
            let entry = Entry(
                timer: timer, job: job, deadline: deadline.loopNanoseconds, scheduler: scheduler, owner: owner)
            // A stale entry of the same task (its sleep was cancelled and the task never came back
            // here) is done with: its wake-up job runs now.
            let (accepted, displaced): (Bool, Entry?) = state.withLock { state in
                guard !state.ended else { return (false, nil) }
                var displaced: Entry?
                if let scheduler {
                    if let old = state.byScheduler[scheduler.address] { displaced = take(old, from: &state) }
                    state.byScheduler[scheduler.address] = id
                    tracked.add(1, ordering: .relaxed)
                }
                state.entries[id] = entry
                if isStealable { order(entry, id, in: &state) }
                // Like a `Loop.sleep`, a waiting job counts as a task waiting for a timer: a test
                // loop on virtual time reports a stall if the test never advances to it.
                loop.timerAwaiters.add(1, ordering: .relaxed)
                return (true, displaced)
            }
            if let displaced { release(displaced) }
            guard accepted else {
                // The loop no longer accepts items: the timer would never fire. The sleep is
                // refused by cancelling its task, the current one (see "The loop's end").
                withUnsafeCurrentTask { $0?.cancel() }
                release(entry)
                return
            }
            for mode in modes { loop.add(timer, forMode: mode) }
        }

        /// `SchedulingExecutor.enqueue(_:at:tolerance:clock:)` for the executor `owner` — the one
        /// body of the three loop executors' conformances: the job waits in a loop timer, or — for
        /// a clock the loop cannot convert — in the clock's own sleep, after which it goes to the
        /// executor's own enqueue. (A shared protocol extension cannot witness the public SPI
        /// requirement for the three public types, so each conformance is one call here.)
        func schedule<C: Clock, Owner: Executor & AnyObject & Sendable>(
            _ job: consuming ExecutorJob, at instant: C.Instant, tolerance: C.Duration?, clock: C, for owner: Owner
        ) {
            let job = UnownedJob(job)
            guard let deadline = loopDeadline(of: instant, clock: clock, on: loop) else {
                scheduleOnForeignClock(job, at: instant, tolerance: tolerance, clock: clock) {
                    owner.enqueue(ExecutorJob($0))
                }
                return
            }
            schedule(job, at: deadline, tolerance: loopTolerance(tolerance), keeping: owner)
        }

        /// `SchedulingExecutor.enqueue(_:after:tolerance:clock:)` for the executor `owner`; see
        /// ``schedule(_:at:tolerance:clock:for:)``.
        func schedule<C: Clock, Owner: Executor & AnyObject & Sendable>(
            _ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C, for owner: Owner
        ) {
            let job = UnownedJob(job)
            guard let deadline = loopDeadline(after: delay, clock: clock, on: loop) else {
                scheduleOnForeignClock(job, at: clock.now.advanced(by: delay), tolerance: tolerance, clock: clock) {
                    owner.enqueue(ExecutorJob($0))
                }
                return
            }
            schedule(job, at: deadline, tolerance: loopTolerance(tolerance), keeping: owner)
        }

        /// Called by every enqueue of the executor, before the job is queued: if `job` is a task
        /// whose sleep here was cancelled, its timer goes now and its wake-up job runs. Returns the
        /// executor's keep-alive if `job` is a woken sleeper coming back: the caller then queues
        /// the job and hands it to ``sleeperArrived(_:)`` — in that order, because the keep-alive
        /// may be the executor's last strong reference (the runtime does not hold the executor it
        /// enqueues on), and the queue takes its own while the job waits.
        @inline(__always)
        func noteEnqueue(_ job: UnownedJob) -> (AnyObject & Sendable)? {
            guard tracked.load(ordering: .relaxed) > 0 else { return nil }
            return noteEnqueueOfPossibleSleeper(job)
        }

        /// A woken sleeper is queued: the seal held for its way back is released, and then the
        /// executor's keep-alive.
        func sleeperArrived(_ keepAlive: AnyObject & Sendable) {
            loop.releaseSealHold(for: "Task.sleep")
            withExtendedLifetime(keepAlive) {}
        }

        private func noteEnqueueOfPossibleSleeper(_ job: UnownedJob) -> (AnyObject & Sendable)? {
            let address = unsafeBitCast(job, to: UInt.self)
            let (cancelled, returned): (Entry?, (AnyObject & Sendable)?) = state.withLock { state in
                if let owner = state.returning.removeValue(forKey: address) {
                    tracked.subtract(1, ordering: .relaxed)
                    return (nil, owner)
                }
                // The sleeper is back while its wake-up still waits: only a cancellation resumes
                // a sleeping task without its wake-up.
                guard let id = state.byScheduler[address] else { return (nil, nil) }
                return (take(id, from: &state), nil)
            }
            if let cancelled { release(cancelled) }
            return returned
        }

        /// The timer of entry `id` fired (loop thread): its job goes to the queue. A sleeper's seal
        /// is held until it is back (see "The way back").
        private func fire(_ id: UInt64) {
            let (entry, stale): (Entry?, Bool) = state.withLock { state in
                guard let entry = take(id, from: &state) else { return (nil, false) }
                if isStealable { dropTakenTop(of: &state) }
                return (entry, holdForTheWayBack(of: entry, in: &state))
            }
            if stale { loop.releaseSealHold(for: "Task.sleep") }
            guard let entry else { return }
            enqueue(entry.job)
        }

        /// The seal held for a woken sleeper's way back (see "The way back"), recorded as
        /// returning; true if a hold of the same task was already out (the caller then releases
        /// one: one hold per task). Lock held.
        private func holdForTheWayBack(of entry: Entry, in state: inout State) -> Bool {
            guard let scheduler = entry.scheduler, loop.holdSeal(for: "Task.sleep") else { return false }
            // A way back of the same task still open (it never came here): one hold each.
            let stale = state.returning.updateValue(entry.owner, forKey: scheduler.address) != nil
            if !stale { tracked.add(1, ordering: .relaxed) }
            return stale
        }

        private func registerEndHandler() {
            let token = loop.addEndHandler { [weak self] in self?.loopEnded() }
            let duplicate: UInt64? = state.withLock { state in
                guard state.endHandler == nil, !state.ended else { return token }
                state.endHandler = token
                state.ended = token == nil
                return nil
            }
            if let duplicate { loop.removeEndHandler(duplicate) }
            endHandled.store(true, ordering: .releasing)
        }

        /// The loop stops accepting items: every waiting job runs now (its sleep returns early).
        private func loopEnded() {
            let (entries, stale): ([(UInt64, Entry)], Int) = state.withLock { state in
                state.ended = true
                state.endHandler = nil
                let all = state.entries.sorted { $0.key < $1.key }
                loop.timerAwaiters.subtract(all.count, ordering: .relaxed)
                state.entries.removeAll()
                state.byScheduler.removeAll()
                state.order = DeadlineHeap()
                earliest.store(.max, ordering: .relaxed)
                // Woken sleepers on their way back keep their holds: the drain waits for them; and
                // the sleepers woken now are on their way back too.
                tracked.store(state.returning.count, ordering: .relaxed)
                var stale = 0
                for (_, entry) in all where holdForTheWayBack(of: entry, in: &state) { stale += 1 }
                return (all, stale)
            }
            for _ in 0..<stale { loop.releaseSealHold(for: "Task.sleep") }
            for (_, entry) in entries { release(entry) }
        }

        /// The earliest deadline of a stealable table, in loop time (`Int64.max`: none); see
        /// `earliest`.
        ///
        /// - Important: Safe from any thread.
        var earliestDeadline: Int64 { earliest.load(ordering: .relaxed) }

        /// Takes every job of a stealable table whose deadline is at or before `cutoff` (loop time),
        /// as if its timer had fired, and hands them to `deliver` — another loop's queue — in
        /// deadline order; the number taken. Where `deliver` refuses them (its loop stopped
        /// accepting jobs), they go to this table's own queue. For a loop busy with a long job:
        /// its timers cannot fire until the job ends (see "Overdue jobs elsewhere").
        ///
        /// - Important: Safe from any thread.
        func takeOverdue(
            dueBy cutoff: Int64, into deliver: ([UnownedJob], _ keeping: AnyObject) -> Bool
        ) -> Int {
            guard earliest.load(ordering: .relaxed) <= cutoff else { return 0 }
            let (taken, stale): ([Entry], Int) = state.withLock { state in
                var taken: [Entry] = []
                var stale = 0
                while let top = state.order.top, top.deadline <= cutoff {
                    state.order.removeTop()
                    guard let entry = take(top.id, from: &state) else { continue }
                    if holdForTheWayBack(of: entry, in: &state) { stale += 1 }
                    taken.append(entry)
                }
                earliest.store(state.order.top?.deadline ?? .max, ordering: .relaxed)
                return (taken, stale)
            }
            for _ in 0..<stale { loop.releaseSealHold(for: "Task.sleep") }
            guard let owner = taken.first?.owner else { return 0 }
            // The timers go first: they fire here no more (a callout under way finds nothing).
            for entry in taken { entry.timer.invalidate() }
            let jobs = taken.map(\.job)
            if !deliver(jobs, owner) {
                for job in jobs { enqueue(job) }
            }
            return jobs.count
        }

        /// Records entry `id` in a stealable table's deadline order (lock held).
        private func order(_ entry: Entry, _ id: UInt64, in state: inout State) {
            // Places of entries already gone outnumber live ones: start over from the live ones.
            if state.order.count >= 64 && state.order.count > 2 * state.entries.count {
                state.order = DeadlineHeap(
                    state.entries.map { DeadlineHeap.Place(deadline: $0.value.deadline, id: $0.key) })
            } else {
                state.order.insert(DeadlineHeap.Place(deadline: entry.deadline, id: id))
            }
            earliest.store(state.order.top?.deadline ?? .max, ordering: .relaxed)
        }

        /// Drops the places of entries already taken from the top of a stealable table's deadline
        /// order, after an entry was taken (lock held). Timers fire in about deadline order, so
        /// the fired entry is usually the top.
        private func dropTakenTop(of state: inout State) {
            while let top = state.order.top, state.entries[top.id] == nil { state.order.removeTop() }
            earliest.store(state.order.top?.deadline ?? .max, ordering: .relaxed)
        }

        /// Removes entry `id` from the table (lock held).
        private func take(_ id: UInt64, from state: inout State) -> Entry? {
            guard let entry = state.entries.removeValue(forKey: id) else { return nil }
            loop.timerAwaiters.subtract(1, ordering: .relaxed)
            if let scheduler = entry.scheduler, state.byScheduler[scheduler.address] == id {
                state.byScheduler.removeValue(forKey: scheduler.address)
            }
            if entry.scheduler != nil { tracked.subtract(1, ordering: .relaxed) }
            return entry
        }

        /// An entry taken out before its time: its timer goes and its job runs now (a `Task.sleep`
        /// wake-up job whose sleep was cancelled finds it over and only cleans up; otherwise the
        /// sleep returns early).
        private func release(_ entry: Entry) {
            entry.timer.invalidate()
            enqueue(entry.job)
        }
    }

    /// A binary min-heap of (deadline, entry id): a stealable `DelayedJobs` table's deadline order.
    struct DeadlineHeap {
        struct Place {
            let deadline: Int64
            let id: UInt64
        }

        private var places: [Place] = []

        init() {}

        /// A heap of `places`, in O(n).
        init(_ places: [Place]) {
            self.places = places
            var index = places.count / 2
            while index > 0 {
                index -= 1
                siftDown(from: index)
            }
        }

        var count: Int { places.count }
        var top: Place? { places.first }

        mutating func insert(_ place: Place) {
            places.append(place)
            var child = places.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard places[child].deadline < places[parent].deadline else { break }
                places.swapAt(child, parent)
                child = parent
            }
        }

        mutating func removeTop() {
            guard !places.isEmpty else { return }
            let last = places.removeLast()
            guard !places.isEmpty else { return }
            places[0] = last
            siftDown(from: 0)
        }

        private mutating func siftDown(from start: Int) {
            var parent = start
            while true {
                let left = 2 * parent + 1
                guard left < places.count else { return }
                var least = left
                if left + 1 < places.count && places[left + 1].deadline < places[left].deadline { least = left + 1 }
                guard places[least].deadline < places[parent].deadline else { return }
                places.swapAt(least, parent)
                parent = least
            }
        }
    }

    /// Where a job that an executor receives with a deadline or delay on clock `C` goes on
    /// `loop`'s clock, or `nil` for a clock whose durations are not `Swift.Duration` (then only the
    /// clock itself can tell when an instant comes).
    func loopDeadline<C: Clock>(of instant: C.Instant, clock: C, on loop: Loop) -> ContinuousClock.Instant? {
        // A loop clock's instants are on its loop's clock (ContinuousClock's instants, virtual on a
        // test loop).
        if let clock = clock as? LoopClock, let instant = instant as? ContinuousClock.Instant {
            return clock.loop === loop ? instant : loop.now + clock.now.duration(to: instant)
        }
        if clock is ContinuousClock, let instant = instant as? ContinuousClock.Instant {
            // On a real loop, `Loop.now` is `ContinuousClock.now`: the instant as it is. A test
            // loop's clock is virtual: the same distance from its now.
            guard loop.hasVirtualClock else { return instant }
            return loop.now + virtualDistance(ContinuousClock.now.duration(to: instant))
        }
        guard let distance = clock.now.duration(to: instant) as? Duration else { return nil }
        return loop.now + distance
    }

    /// The distance to a `ContinuousClock` deadline, for a test loop's virtual clock, rounded up
    /// to a whole millisecond. The caller computed the deadline from the real clock
    /// (`Task.sleep(for: d)` asks for `.now + d`) some time before this reads it again, so the
    /// distance comes out a little under `d` — by microseconds, or more on a busy machine. On
    /// whole milliseconds, a test that sleeps one second and advances one second sees the wake-up
    /// at exactly one second.
    private func virtualDistance(_ distance: Duration) -> Duration {
        let nanoseconds = distance / .nanoseconds(1)
        guard nanoseconds > 0 else { return distance }
        // Beyond `Int64.max` milliseconds (292 million years) it is as good as never: the loop's
        // own arithmetic saturates from there.
        let milliseconds = (nanoseconds / 1_000_000).rounded(.up)
        guard milliseconds < Double(Int64.max) else { return .seconds(Int64.max) }
        return .milliseconds(Int64(milliseconds))
    }

    /// `delay` on clock `C` as a deadline on `loop`'s clock, or `nil` for a clock whose durations
    /// are not `Swift.Duration`.
    func loopDeadline<C: Clock>(after delay: C.Duration, clock: C, on loop: Loop) -> ContinuousClock.Instant? {
        guard let delay = delay as? Duration else { return nil }
        return loop.now + delay
    }

    /// A tolerance on clock `C` in `Swift.Duration` (none: zero, a precise timer).
    func loopTolerance<D>(_ tolerance: D?) -> Duration {
        (tolerance as? Duration) ?? .zero
    }

    /// A clock the loop cannot convert: the job waits in the clock's own `sleep`, on a task of the
    /// default executor, and then goes to `enqueue`. (Cancellation cannot reach that sleep.)
    func scheduleOnForeignClock<C: Clock>(
        _ job: UnownedJob, at instant: C.Instant, tolerance: C.Duration?, clock: C,
        enqueue: @escaping @Sendable (UnownedJob) -> Void
    ) {
        let wait = ForeignWait(instant: instant, tolerance: tolerance, clock: clock)
        Task.detached {
            try? await wait.clock.sleep(until: wait.instant, tolerance: wait.tolerance)
            enqueue(job)
        }
    }

    /// What a foreign clock's wait needs, handed to the waiting task (clocks are `Sendable`; their
    /// instants and durations are plain values the task only passes back to the clock).
    private struct ForeignWait<C: Clock>: @unchecked Sendable {
        let instant: C.Instant
        let tolerance: C.Duration?
        let clock: C
    }
#endif
