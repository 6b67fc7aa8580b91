// The end of a loop's life, in one place (DESIGN "Lifecycle").
//
// A loop is `open` → `draining` → `ended`. Every entry point that hands the loop something consults
// `LoopState.lifecycle` under the loop's lock, so that no call is accepted and then lost:
//
// - open: everything is accepted.
// - draining (a `LoopThread` is shutting down, explicitly or because nothing can reach it any
//   more): new *items* are refused — a timer, observer, descriptor source or port added now is
//   invalidated, a signalled source's add returns `false`, an async sleep, tick sequence or
//   activity stream ends at once. *Work* is still accepted — blocks, executor jobs, port messages
//   — because the drain runs it.
// - ended: nothing runs any more. `perform` returns `false`, an executor's enqueue traps with a
//   message naming the loop and why it ended (the one remaining programmer error), a port's send
//   throws, an added item is invalidated.
//
// The order of a shutdown, and why:
// 1. Refuse new items and resume every async waiter (sleep, ticks, activities) *first*, while the
//    loop's executors still run jobs: a waiter's continuation may be a job of an actor pinned to
//    this very loop, and it must find an open queue.
// 2. Stop the drive; run passes in every mode that has queued blocks, executor jobs or undelivered
//    port messages, until a locked check finds none (work queued by that work runs too). While a
//    resumption of a waiter is under way on another thread (its task is enqueued on this loop
//    inside the resume call: `holdSeal(for:)`), wait for it — for a bounded time, then trap
//    naming the holders (`LoopThread.sealHoldLimit`).
// 3. Seal (`ended`) in the same locked step that found nothing left, holding the loop's lock and
//    every executor queue's and port's own lock at once (they accept work under their own locks),
//    so no work slips in between the last check and the seal; the queues and ports close then.
// 4. Tear down: detach every item (SPEC R5), close the descriptors; then the thread exits and
//    whoever waits in `shutdown()` returns.

// Who keeps what of a loop's end. Whether the loop has ended, and why, is kept in one place:
// `LoopState.lifecycle`. Every other "ended" in the package is an item's own life, which the
// lifecycle tells of the loop's end:
// - a job queue's `closedReason` and a port's `failure`: set by the seal, with the lifecycle's own
//   notice (`LoopEndNotice`), under the item's lock — jobs and messages are accepted under that
//   lock, not the loop's. A queue also closes when its executor is released, a port when it is
//   invalidated.
// - a waiter's `closed`: the teardown closed its descriptors, so no thread writes to a reused
//   descriptor number.
// - a driver's `driveEnded`: the drive stopped, which a loop may outlive (`Loop.main`'s driver).
// - a `LoopThread`'s `joinClaimed`: who joins the thread, once.
// - `DelayedJobs`' `ended` and a mailbox's `finished`: a waiter's own end — the loop's end handler
//   told it, or it was cancelled or answered.

/// Why a loop ended (or is draining): part of every message about work that came too late.
enum LoopEndReason: Sendable {
    /// `LoopThread.shutdown()` was called, on the named thread.
    case shutDown(calledOn: String)
    /// The last `LoopThread` handle and the last executor of its loop were released.
    case released
    /// The loop's thread exited (a loop of a thread the program runs itself, SPEC R5).
    case threadExited

    /// A clause for messages: "its LoopThread was shut down (shutdown() was called on thread …)".
    var explanation: String {
        switch self {
        case .shutDown(let thread): "its LoopThread was shut down (shutdown() was called on thread \(thread))"
        case .released: "its LoopThread was released (no LoopThread handle or executor was left)"
        case .threadExited: "its thread has exited"
        }
    }
}

/// The life of a loop: open → draining → ended → torn down (a loop whose thread exits goes from
/// open to ended at once; a loop released without a teardown, by its deinit, from any stage to torn
/// down). The one place the loop's end is kept: every "has it ended?" is a question asked of it.
/// Guarded by the loop's lock (a field of `LoopState`).
enum LoopLifecycle {
    case open
    case draining(LoopEndReason)
    case ended(LoopEndReason)
    /// Its items were detached and its descriptors closed (SPEC R5): nothing is left to end.
    case tornDown(LoopEndReason)

    /// New items (timers, observers, sources, ports, async waiters) are accepted only while open.
    var acceptsItems: Bool {
        if case .open = self { return true }
        return false
    }

    /// Work (blocks, executor jobs, port messages) is accepted until the loop has ended: the drain
    /// runs what is accepted while draining.
    var acceptsWork: Bool {
        switch self {
        case .open, .draining: true
        case .ended, .tornDown: false
        }
    }

    var isEnded: Bool { !acceptsWork }

    /// The items were detached (see `Loop.tearDown()`).
    var isTornDown: Bool {
        if case .tornDown = self { return true }
        return false
    }

    var reason: LoopEndReason? {
        switch self {
        case .open: nil
        case .draining(let reason), .ended(let reason), .tornDown(let reason): reason
        }
    }
}

/// An item that accepts work of its own for the loop, outside the loop's lock: a `LoopPort`
/// (messages) and a `LoopJobQueue` (executor jobs). The seal asks all of them at once (see
/// `Loop.sealIfIdle`), so that no work slips in between "nothing is queued" and "closed".
protocol LoopEndAware: AnyObject, Sendable {
    /// Work is queued that the drain must still run. Takes the item's own lock.
    var hasQueuedWork: Bool { get }
    /// With the item's own lock held: returns false if work is still queued; otherwise calls
    /// `rest` (which decides for the remaining items, holding their locks) and, if it returns
    /// true, refuses further work and returns true. Called with the loop's lock held; takes only
    /// the item's own lock, and releases nothing that could run user code.
    func sealIfIdle(_ end: LoopEndNotice, rest: () -> Bool) -> Bool
    /// Refuses further work, whatever is queued (the loop ended without a drain, or refused the
    /// item).
    func loopEnded(_ end: LoopEndNotice)
}

/// What a sealed item says when it refuses work: the loop's name and the sentence for messages.
struct LoopEndNotice {
    let loopName: String
    /// "the loop … has ended: …".
    let message: String
}

extension Loop {
    /// How the loop stands: a sentence for messages, `nil` while open.
    var endExplanation: String? { lock.withLock { state.lifecycle.reason?.explanation } }

    /// open → draining: refuses new items and resumes every async waiter (shutdown step 1).
    /// Returns false, doing nothing, if the loop was not open.
    @discardableResult
    func beginDraining(_ reason: LoopEndReason) -> Bool {
        let handlers: [@Sendable () -> Void]? = lock.withLock {
            guard state.lifecycle.acceptsItems else { return nil }
            state.lifecycle = .draining(reason)
            return takeEndHandlers()
        }
        guard let handlers else { return false }
        for handler in handlers { handler() }
        return true
    }

    /// What the drain does next (shutdown steps 2 and 3).
    enum DrainStep: Equatable {
        /// Run a pass in each of these modes: blocks, executor jobs or port messages are queued
        /// there (`.common` counts as `.default`).
        case run([Mode])
        /// Nothing is queued, but resumptions of waiters are under way (see ``holdSeal(for:)``):
        /// wait for their jobs, then ask again.
        case wait
        /// Nothing was left: the loop has ended (sealed in the same locked step, closing its
        /// executors' queues and its ports).
        case sealed
    }

    /// The next step of the drain. With `force`, seals whatever is left (a drain that never ran
    /// dry).
    func nextDrainStep(force: Bool = false) -> DrainStep {
        lock.withLock {
            if force {
                preconditionNoJobsQueuedLocked(
                    "its shutdown's drain never ran dry (10,000 rounds: work that queues more work for ever)")
                sealLocked()
                return .sealed
            }
            while true {
                let modes = modesWithQueuedWorkLocked()
                if !modes.isEmpty { return .run(modes) }
                if !state.sealHolds.isEmpty { return .wait }
                // Nothing was queued a moment ago. Jobs and messages are accepted under their
                // queue's or port's own lock, not this one: seal only if all of them are still idle
                // with every one of those locks held at once, else drain again.
                let end = endNoticeLocked()
                if sealIfIdle(endAwareItemsLocked()[...], end) {
                    state.lifecycle = .ended(state.lifecycle.reason ?? .threadExited)
                    for item in unwatchedEndAwareItemsLocked() { item.loopEnded(end) }
                    return .sealed
                }
            }
        }
    }

    /// The modes with blocks, executor jobs or port messages queued. Lock held.
    private func modesWithQueuedWorkLocked() -> [Mode] {
        var modes: [Mode] = []
        func note(_ mode: Mode) {
            if !modes.contains(mode) { modes.append(mode) }
        }
        for block in state.blocks { note(block.modes.representative) }
        for queue in state.jobQueues where queue.hasQueuedWork { note(BlockModes(queue.modes).representative) }
        for source in state.descriptorSources.values {
            guard let port = source.endAware, port.hasQueuedWork else { continue }
            if let mode = source.modes.first(where: { _ in true }) { note(mode.mode) }
        }
        return modes
    }

    /// The items that accept work outside the loop's lock and can still run it, in a fixed order:
    /// the seal waits until each of them is idle. Lock held.
    private func endAwareItemsLocked() -> [any LoopEndAware] {
        var items: [any LoopEndAware] = state.jobQueues
        for source in state.descriptorSources.values {
            if let item = source.endAware { items.append(item) }
        }
        return items
    }

    /// The items bound to the loop that accept work outside its lock but are in no mode (a port
    /// removed from every mode): nothing can run their work here, so the seal does not wait for
    /// them, but they are told the loop ended with the others — a send then throws, and what they
    /// hold stays theirs (a port's `invalidate()` returns it). Lock held.
    private func unwatchedEndAwareItemsLocked() -> [any LoopEndAware] {
        state.boundEndAwareItems = state.boundEndAwareItems.filter { $0.value.target != nil }
        let watched = Set(state.descriptorSources.values.map { ObjectIdentifier($0) })
        return state.boundEndAwareItems.compactMap { watched.contains($0.key) ? nil : $0.value.target }
    }

    /// Seals `items` all or none: each holds its lock while the rest decide (see `LoopEndAware`).
    private func sealIfIdle(_ items: ArraySlice<any LoopEndAware>, _ end: LoopEndNotice) -> Bool {
        guard let first = items.first else { return true }
        return first.sealIfIdle(end) { sealIfIdle(items.dropFirst(), end) }
    }

    /// The notice sealed items give (the loop is draining or ended). Lock held.
    func endNoticeLocked() -> LoopEndNotice {
        let reason = state.lifecycle.reason ?? .threadExited
        return LoopEndNotice(loopName: description, message: "the \(self) has ended: \(reason.explanation)")
    }

    /// Traps if an executor queue of the loop still holds jobs as the loop ends without running
    /// them (`why`): their tasks would stay suspended for ever, which nothing must do silently.
    /// Blocks are dropped with the loop (SPEC R5); a job is a task. Lock held.
    func preconditionNoJobsQueuedLocked(_ why: @autoclosure () -> String) {
        let loaded = state.jobQueues.filter(\.hasQueuedWork)
        guard !loaded.isEmpty else { return }
        let queues = loaded.map { queue in
            let name = queue.label.map { "'\($0)'" } ?? "(unlabelled)"
            return "executor \(name) in modes \(queue.modes.map(\.rawValue)): \(queue.count) job(s)"
        }
        preconditionFailure(
            "LoopRuntime: the \(self) is ending because \(why()), with jobs still queued: \(queues.joined(separator: "; ")). Their tasks would stay suspended for ever. Let the loop run until its executors' jobs have run — run it in their modes before its thread exits, or use a LoopThread, whose shutdown runs every job accepted before it."
        )
    }

    /// → ended, whatever is queued. Closes the executors' queues (a job enqueued from now on traps,
    /// naming the reason) and refuses further port messages. Lock held.
    func sealLocked() {
        state.lifecycle = .ended(state.lifecycle.reason ?? .threadExited)
        let end = endNoticeLocked()
        for item in endAwareItemsLocked() + unwatchedEndAwareItemsLocked() { item.loopEnded(end) }
    }

}

extension Loop {
    /// Registers `handler` to be called once when the loop stops accepting items: when a
    /// `LoopThread`'s shutdown begins (before its jobs are drained, so a continuation it resumes
    /// still runs), or at thread-exit teardown. Returns `nil`, without registering, if the loop no
    /// longer accepts items. Support for the `LoopExecutor` module: pending sleeps, ticks and
    /// activity streams end when their loop does.
    ///
    /// - Important: Safe from any thread.
    package func addEndHandler(_ handler: @escaping @Sendable () -> Void) -> UInt64? {
        lock.withLock {
            guard state.lifecycle.acceptsItems else { return nil }
            state.nextEndHandlerToken += 1
            state.endHandlers[state.nextEndHandlerToken] = handler
            return state.nextEndHandlerToken
        }
    }

    /// Forgets a handler registered with ``addEndHandler(_:)``.
    ///
    /// - Important: Safe from any thread.
    package func removeEndHandler(_ token: UInt64) {
        let removed = lock.withLock { state.endHandlers.removeValue(forKey: token) }
        _ = removed  // released here, after unlocking: it may hold the last reference to user state
    }

    /// Keeps the drain from sealing the loop until ``releaseSealHold(for:)``: taken by whoever is
    /// about to hand the loop work it must accept — the resumption of an async waiter whose task
    /// will then be enqueued on this loop's executor — for the few instructions between deciding
    /// and enqueuing. Without it a shutdown could seal in between, and the enqueue would trap.
    /// Returns false, taking nothing, if the loop has already ended. Support for the
    /// `LoopExecutor` module.
    ///
    /// A drain waits for the holds out for at most ``LoopThread``'s limit (`sealHoldLimit`), then
    /// traps naming `holder`: a hold is meant to last microseconds, and one that is never given
    /// back would otherwise hang the shutdown for ever.
    ///
    /// - Parameter holder: What holds it, for that message ("Loop.sleep", "Task.sleep", …).
    /// - Important: Safe from any thread. Release each hold exactly once.
    package func holdSeal(for holder: StaticString) -> Bool {
        lock.withLock {
            guard !state.lifecycle.isEnded else { return false }
            state.sealHolds.add(holder)
            return true
        }
    }

    /// Releases a hold taken with ``holdSeal(for:)``; the last one wakes a draining loop, so that
    /// it can seal, and a loop on a virtual clock, whose wait treats a hold as work on its way (it
    /// may have blocked on it after the held task's job arrived but before the hold went).
    ///
    /// - Important: Safe from any thread.
    package func releaseSealHold(for holder: StaticString) {
        let released: Bool = change { change in
            guard state.sealHolds.remove(holder) else { return false }
            if state.sealHolds.isEmpty && (!state.lifecycle.acceptsItems || hasVirtualClock) {
                change.mustLookAgain()
            }
            return true
        }
        precondition(released, "Loop.releaseSealHold(for: \"\(holder)\"): no such hold was taken on the \(self).")
    }

    /// True while a hold is out (see ``holdSeal(for:)``).
    var hasSealHolds: Bool { lock.withLock { !state.sealHolds.isEmpty } }

    /// The holds out, for messages: `"Loop.sleep (1), Task.sleep (2)"`.
    var sealHoldersDescription: String { lock.withLock { state.sealHolds.description } }

    /// False once the loop stopped accepting new items (a `LoopThread` shutting down or ended).
    ///
    /// - Important: Safe from any thread.
    public var isOpen: Bool { lock.withLock { state.lifecycle.acceptsItems } }

    /// True once the loop has ended: nothing runs on it any more, and work handed to it is refused
    /// (``perform(inModes:label:_:)`` returns `false`).
    ///
    /// - Important: Safe from any thread.
    public var hasEnded: Bool { lock.withLock { state.lifecycle.isEnded } }

    /// A strong reference that keeps the loop's `LoopThread` running, or `nil` for a loop that no
    /// `LoopThread` owns. Support for the `LoopExecutor` module: an executor holds one, so a
    /// `LoopThread` whose handle was released keeps serving the actors pinned to it, and ends when
    /// the last of them is gone.
    ///
    /// - Important: Safe from any thread.
    package func lifetimeHold() -> AnyObject? {
        lock.withLock { state.lifetimeHold.object }
    }

    /// Records the keep-alive object of the `LoopThread` that owns this loop (held weakly).
    func setLifetimeHold(_ lifetimeHold: AnyObject) {
        lock.withLock { state.lifetimeHold = WeakObject(object: lifetimeHold) }
    }
}

/// A weak reference, for tables that must not keep their entries alive.
struct WeakObject {
    weak var object: AnyObject?
}

/// The seal holds out on a loop, by holder (a handful of kinds: a short array). Guarded by the
/// loop's lock (a field of `LoopState`).
struct SealHolds: CustomStringConvertible {
    private var holders: [(name: StaticString, count: Int)] = []

    var isEmpty: Bool { holders.isEmpty }

    mutating func add(_ holder: StaticString) {
        if let index = index(of: holder) {
            holders[index].count += 1
        } else {
            holders.append((holder, 1))
        }
    }

    /// False if `holder` holds nothing.
    mutating func remove(_ holder: StaticString) -> Bool {
        guard let index = index(of: holder) else { return false }
        holders[index].count -= 1
        if holders[index].count == 0 { holders.remove(at: index) }
        return true
    }

    private func index(of holder: StaticString) -> Int? {
        holder.withUTF8Buffer { wanted in
            holders.firstIndex { entry in entry.name.withUTF8Buffer { $0.elementsEqual(wanted) } }
        }
    }

    /// `"Loop.sleep (1), Task.sleep (2)"`.
    var description: String {
        holders.map { "\($0.name) (\($0.count))" }.joined(separator: ", ")
    }
}
