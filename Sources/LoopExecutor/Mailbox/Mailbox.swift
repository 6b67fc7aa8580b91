import LoopRuntime
import Synchronization

// The one place in LoopExecutor where continuations are created and resumed.
//
// Every async bridge — `Loop.sleep`, `Loop.ticks`, `Loop.activities`, `Loop.switchMode` — is a
// producer on the loop's thread (a timer, an observer, a driver callback) handing values to one
// consumer task, with a loop end and a cancellation that may race it. They share this mailbox:
//
// - `MailboxState` is a pure state machine: its mutating methods say what must happen (deliver,
//   suspend, resume a waiter, clean up, trap) and do none of it, so exactly-once resumption is
//   proved here once, for all of them;
// - `Mailbox` holds it in a lock and performs the actions, outside the lock except for the resume
//   (see "Why resume inside the lock");
// - a `MailboxBuffer` says what is kept for a consumer that is not waiting: one value (a sleep, a
//   mode switch), the latest tick, a ring of activity events.
//
// A second task calling `next()` on the same iterator while another waits would silently replace
// the first waiter, which would then wait for ever: it traps, naming the sequence
// (swift-async-algorithms' rule).

// Why resume inside the lock, and touch it again right after the `await`.
//
// When a continuation is resumed before its task has finished suspending (the loop thread resumes
// it while the awaiting task is still between handing the continuation over and parking), the
// runtime lets the task run on inline, and the only synchronization between the two threads is an
// atomic in the concurrency runtime, which the thread sanitizer does not instrument. The sanitizer
// then reports the resumer's access to the continuation's context and the task's next use of the
// same task-allocator memory (its next frame) as a race — under load, when the interleaving is
// common. Resuming inside the lock that the awaiting side takes once it is past the `await` makes
// the hand-off visible: the task cannot pass the `await` before the resumer holds the lock, and it
// then waits for the resumer to release it. (Resuming only enqueues the task's job; no user code
// runs inside the lock.)

// How a waiter pinned to a loop gets back onto it.
//
// A continuation resumes its task on the generic executor — Swift's global pool, or the default
// executor when `LoopExecutorFactory` installed one — and only from there does the task hop onto
// the executor of its actor. For a waiter isolated to an actor pinned to a loop, that would make
// the way back depend on another executor having a free thread: a synchronous `shutdown()` called
// from the only free thread of that executor (a one-CPU cooperative pool, or the default
// executor's own lane) would wait for a task that could never run, and a drain that did not wait
// would end the loop before the task's hop arrived (a trap).
//
// So such a waiter does not wait in a continuation. It parks: it hops onto a `ParkingSpot`, an
// actor that is its own executor and keeps the job it is handed instead of running it. Waking it
// queues a block on the actor's loop that runs that job; the job's next step is the hop back onto
// the actor, an enqueue made on the loop's own thread. The task never leaves the loop's hands: no
// other thread, no global pool, and a loop that is draining accepts and runs both (blocks and
// jobs are work, SPEC "Lifecycle").
//
// What is left is the wake-up itself when it is made on another thread than the loop's: a shutdown
// must not seal the loop between the decision to wake and the block's enqueue. The waker holds
// the seal (`Loop.holdSeal(for:)`) across that call, from the locked step that decided it; the
// hold lasts as long as the waker's own few instructions, not as long as a task's way back.

/// What a mailbox keeps for its consumer while the consumer is not waiting.
protocol MailboxBuffer: Sendable {
    associatedtype Element: Sendable

    /// Keeps `element` (or folds it into what is kept).
    mutating func append(_ element: Element)
    /// The next element for the consumer, if any.
    mutating func removeFirst() -> Element?
    /// Forgets everything kept.
    mutating func removeAll()
    /// Enough is kept that a consumer taking elements in batches should get them now.
    var wantsHandOff: Bool { get }
}

extension MailboxBuffer {
    var wantsHandOff: Bool { false }
}

/// The state of a mailbox: a pure state machine (no locks, no resumes, no calls out). Generic over
/// the waiter's continuation, so that its tests need no tasks.
struct MailboxState<Buffer: MailboxBuffer, Continuation: Sendable>: Sendable {
    typealias Element = Buffer.Element

    /// The consumer task waiting for an element.
    struct Waiter: Sendable {
        let continuation: Continuation
        /// The executor of the task's isolation if it is a loop's: the task is parked, and woken
        /// on that loop (see "How a waiter pinned to a loop gets back onto it").
        let hopTarget: LoopSerialExecutor?
        /// The task runs on the producer's loop thread, so each resumption costs that loop a pass:
        /// it is handed elements only at batch points (see `Loop.activities(_:inModes:buffering:)`).
        let takesBatches: Bool
    }

    private enum Phase {
        case open
        case waiting(Waiter)
        case finished
    }

    private var phase = Phase.open
    private var buffer: Buffer
    /// Why the mailbox finished, for consumers that throw (a sleep): cancellation or a loop end.
    private(set) var failure: (any Error)?
    /// What `finish` must undo: the end-handler registration and the producer (a timer, an
    /// observer). Set once the producer is attached.
    private var registration: Registration?

    struct Registration: Sendable {
        let loop: Loop
        let endHandler: UInt64
        let detachProducer: @Sendable () -> Void

        /// Detaches the producer and forgets the end handler. Lock not held: it takes the loop's.
        func undo() {
            detachProducer()
            loop.removeEndHandler(endHandler)
        }
    }

    init(buffer: Buffer) {
        self.buffer = buffer
    }

    var isFinished: Bool {
        if case .finished = phase { return true }
        return false
    }

    enum NextAction {
        /// Resume the caller at once: with an element, or `nil` (the mailbox has finished).
        case deliver(Element?)
        /// The caller waits; a later `send` or `finish` resumes it.
        case suspend
        /// Another task is already waiting: a programmer error.
        case trapSecondConsumer
    }

    /// The consumer asks for the next element.
    mutating func next(_ waiter: Waiter) -> NextAction {
        switch phase {
        case .waiting:
            return .trapSecondConsumer
        case .finished:
            return .deliver(buffer.removeFirst())
        case .open:
            if let element = buffer.removeFirst() { return .deliver(element) }
            phase = .waiting(waiter)
            return .suspend
        }
    }

    /// A waiter to resume, and with what.
    struct Resumption {
        let waiter: Waiter
        let value: Element?
    }

    /// The producer hands over `element` (`nil`: none, only a batch point). Returns the waiter to
    /// resume, if one may have it now.
    mutating func send(_ element: Element?, isBatchPoint: Bool = false) -> Resumption? {
        guard !isFinished else { return nil }  // dropped
        if let element { buffer.append(element) }
        guard case .waiting(let waiter) = phase else { return nil }
        if waiter.takesBatches && !isBatchPoint && !buffer.wantsHandOff { return nil }
        guard let value = buffer.removeFirst() else { return nil }
        phase = .open
        return Resumption(waiter: waiter, value: value)
    }

    /// ``send(_:isBatchPoint:)`` for the usual case, no consumer waiting: keeps the element and
    /// returns true. False (nothing done) if a consumer waits or the mailbox has finished: then
    /// `send` decides. It returns no `Resumption?`, whose destruction in the caller went through
    /// value witnesses — most of an activity event's cost on the loop thread.
    mutating func keepIfNobodyWaits(_ element: Element?) -> Bool {
        guard case .open = phase else { return false }
        if let element { buffer.append(element) }
        return true
    }

    /// Records the producer's registration; `false` if the mailbox finished meanwhile (then the
    /// caller undoes it).
    mutating func attach(_ registration: Registration) -> Bool {
        guard !isFinished else { return false }
        self.registration = registration
        return true
    }

    /// What finishing requires.
    struct Ending {
        var resumption: Resumption?
        var registration: Registration?
    }

    /// Ends the mailbox with one last element (a sleep's wake-up, a mode switch's outcome): a
    /// waiting consumer gets it, a later one finds it. `nil` if it had already finished.
    mutating func finish(delivering element: Element) -> Ending? {
        guard !isFinished else { return nil }
        buffer.append(element)
        return finish(drain: true, failure: nil)
    }

    /// Ends the mailbox: `drain` keeps what is buffered for the consumer, which then gets `nil`.
    /// Returns `nil` if it had already finished (the first end wins).
    mutating func finish(drain: Bool, failure: (any Error)?) -> Ending? {
        let waiter: Waiter?
        switch phase {
        case .finished: return nil
        case .open: waiter = nil
        case .waiting(let waiting): waiter = waiting
        }
        phase = .finished
        self.failure = failure
        if !drain { buffer.removeAll() }
        defer { registration = nil }
        // A consumer taking batches may be waiting with elements buffered: it gets them first.
        return Ending(
            resumption: waiter.map { Resumption(waiter: $0, value: buffer.removeFirst()) },
            registration: registration)
    }
}

/// A single-consumer mailbox between a producer on a loop's thread and one consumer task.
final class Mailbox<Buffer: MailboxBuffer>: @unchecked Sendable {  // `storage` only touched with `lock` held
    typealias Element = Buffer.Element
    typealias State = MailboxState<Buffer, Wake>

    /// How a waiting consumer is woken.
    enum Wake: Sendable {
        /// A task waiting in a continuation (its isolation is not a loop's).
        case continuation(UnsafeContinuation<Element?, Never>)
        /// A task parked on the mailbox's parking spot (its isolation is a loop's).
        case parked(ParkingSpot<Element>)

        /// Hands `value` to the waiter and wakes it. Called with the mailbox's lock held (see "Why
        /// resume inside the lock"; a parking spot's slot is guarded by that lock).
        func callAsFunction(_ value: Element?) {
            switch self {
            case .continuation(let continuation): continuation.resume(returning: value)
            case .parked(let spot): spot.wakeHoldingLock(with: value)
            }
        }
    }

    // The state and its lock live in the mailbox itself (not in an `ExecutorLocked`): one
    // allocation fewer per sleep. `storage` is only touched inside `withState`.
    private let lock = ExecutorLock()
    /// Touched only inside `withState`, with `lock` held.
    @exclusivity(unchecked) private var storage: State
    /// Set (after the state machine) once the mailbox has finished, so that a deinit can tell
    /// without touching `state`. A generic class's deinit is never specialized: running the state
    /// machine there would instantiate its generic metadata at run time, on every sleep
    /// (BENCHMARKS.md, "Why the code is as it is").
    private let finished = Atomic<Bool>(false)
    /// The loop whose thread produces the elements.
    let loop: Loop
    /// See `parkingSpot(for:)`. Touched only by the consumer, one task at a time (a second
    /// consumer traps before it gets here); its accesses are ordered by the mailbox's lock, which
    /// each wait takes.
    @exclusivity(unchecked) private var parking: ParkingSpot<Element>?
    /// The sequence's name and what it is, for the second-consumer trap ("LoopTicks", "tick
    /// sequence").
    private let name: StaticString
    private let noun: String
    /// Whether the loop's end is an error for the consumer (a sleep) or just the end (a sequence).
    private let loopEndIsFailure: Bool
    /// A consumer on the loop's own thread takes elements in batches (an activity stream: each
    /// resumption costs the loop a pass, whose activities would resume it again).
    private let batchesOnLoopThread: Bool
    /// A waiting consumer is counted in `Loop.timerAwaiters` (a sleep, a tick sequence: only the
    /// loop's timer can resume it; a test loop on virtual time reports a test that never advances).
    private let waitsForATimer: Bool

    init(
        on loop: Loop, buffer: Buffer, name: StaticString, noun: String, loopEndIsFailure: Bool = false,
        batchesOnLoopThread: Bool = false, waitsForATimer: Bool = false
    ) {
        self.loop = loop
        self.storage = MailboxState(buffer: buffer)
        self.name = name
        self.noun = noun
        self.loopEndIsFailure = loopEndIsFailure
        self.batchesOnLoopThread = batchesOnLoopThread
        self.waitsForATimer = waitsForATimer
    }

    /// Runs `body` on the state with the lock held. Never call out to user code inside.
    @inline(__always)
    private func withState<R>(_ body: (inout State) -> R) -> R {
        lock.withLock { body(&storage) }
    }

    deinit {
        // Normally finished already (by its handle, a cancellation, the loop's end or the last
        // element); if not, stop the producer. No consumer can be waiting: it would hold us.
        finishUnlessFinished()
    }

    /// ``finish(drain:failure:)`` without a failure or a drain, skipped at the cost of one load when
    /// the mailbox has finished already (for the deinitializers, which run unspecialized code).
    func finishUnlessFinished() {
        guard !finished.load(ordering: .acquiring) else { return }
        finish(drain: false)
    }

    /// Ties the mailbox to its loop's end and starts the producer: `start` adds the timer or
    /// observer, `detach` invalidates it when the mailbox finishes. A loop that no longer accepts
    /// items finishes the mailbox at once (the producer is detached, never started).
    func attach(start: () -> Void, detach: @escaping @Sendable () -> Void) {
        let weakSelf = WeakMailbox(self)
        guard let token = loop.addEndHandler({ weakSelf.mailbox?.loopEnded() }) else {
            loopEnded()
            detach()
            return
        }
        let registration = State.Registration(
            loop: loop, endHandler: token, detachProducer: detach)
        guard withState({ $0.attach(registration) }) else {
            registration.undo()  // cancelled, or the loop ended, in between
            return
        }
        start()
    }

    /// The producer hands over an element (`nil`: none, only a batch point for a consumer taking
    /// batches). Dropped once the mailbox has finished.
    func send(_ element: Element?, isBatchPoint: Bool = false) {
        let hold: ResumeHold? = withState { state in
            if state.keepIfNobodyWaits(element) { return nil }
            guard let resumption = state.send(element, isBatchPoint: isBatchPoint) else { return nil }
            let hold = ResumeHold(for: resumption.waiter, holder: name)
            resumption.waiter.continuation(resumption.value)
            return hold
        }
        hold?.release()
    }

    /// Ends the mailbox (see `MailboxState.finish`); the first end wins, with its `failure`.
    func finish(drain: Bool, failure: (any Error)? = nil) {
        complete(withState { $0.finish(drain: drain, failure: failure).map(holding) })
    }

    /// Ends the mailbox with a last element (see `MailboxState.finish(delivering:)`).
    func finish(delivering element: Element) {
        complete(withState { $0.finish(delivering: element).map(holding) })
    }

    /// An ending and the seal hold for its resumption, taken in the locked step that decided it
    /// (see "How a resumed waiter gets back onto its loop").
    private func holding(_ ending: State.Ending) -> (State.Ending, ResumeHold?) {
        (ending, ending.resumption.flatMap { ResumeHold(for: $0.waiter, holder: name) })
    }

    /// Detaches the producer, then resumes the waiter: by the time a consumer is back from its
    /// `await`, the timer or observer is gone from the loop (a finished sleep leaves no timer).
    private func complete(_ ending: (State.Ending, ResumeHold?)?) {
        guard let (ending, hold) = ending else { return }
        finished.store(true, ordering: .releasing)
        ending.registration?.undo()
        if let resumption = ending.resumption {
            // Inside the lock (see "Why resume inside the lock").
            withState { _ in resumption.waiter.continuation(resumption.value) }
        }
        hold?.release()
    }

    /// The loop stopped accepting work: the consumer gets what is buffered, then the end.
    private func loopEnded() {
        finish(drain: true, failure: loopEndIsFailure ? loop.endedError : nil)
    }

    /// Waits for the next element in the caller's isolation; `nil` once the mailbox has finished,
    /// with the failure it finished with, if any. Cancelling the task finishes the mailbox, unless
    /// it is not `cancellable` (a mode switch: the driver answers exactly once, and a cancelled
    /// task switching back must still wait for the switch).
    ///
    /// Not `@inline(__always)`, nor is `wait`: forced into their callers, these async frames made
    /// many concurrent loop sleeps stall in bursts (BENCHMARKS.md, "Why the code is as it is").
    func receive(
        isolation actor: isolated (any Actor)?, cancellable: Bool = true
    ) async -> (Element?, failure: (any Error)?) {
        let element: Element?
        if waitsForATimer { loop.timerAwaiters.add(1, ordering: .relaxed) }
        defer { if waitsForATimer { loop.timerAwaiters.subtract(1, ordering: .relaxed) } }
        if cancellable {
            if Task.isCancelled { finish(drain: false, failure: CancellationError()) }
            element = await withTaskCancellationHandler {
                await wait(isolation: actor)
            } onCancel: {
                finish(drain: false, failure: CancellationError())
            }
        } else {
            element = await wait(isolation: actor)
        }
        // Reading under the lock also orders the resumer's work before ours (see above).
        let failure = withState { $0.failure }
        return (element, failure)
    }

    private func wait(isolation actor: isolated (any Actor)?) async -> Element? {
        let takesBatches = batchesOnLoopThread && loop.isCurrentThread
        guard let hopTarget = hopTarget(of: actor) else {
            // `isolation: actor` makes this closure capture the actor and so run isolated to it
            // (SE-0420). Without it the closure ran on the global pool, and its return hopped back
            // onto the actor.
            return await withUnsafeContinuation(isolation: actor) { continuation in
                let waiter = State.Waiter(
                    continuation: .continuation(continuation), hopTarget: nil, takesBatches: takesBatches)
                if let element = next(waiter) { continuation.resume(returning: element) }
            }
        }
        // Parked, and woken on the actor's loop (see "How a waiter pinned to a loop gets back
        // onto it").
        let spot = parkingSpot(for: hopTarget)
        let waiter = State.Waiter(continuation: .parked(spot), hopTarget: hopTarget, takesBatches: takesBatches)
        if let element = next(waiter) { return element }
        await spot.park()
        return spot.takeValue()
    }

    /// The state machine's answer to a consumer asking for the next element: the element to
    /// deliver now, or `nil` once the waiter was registered (it is woken later).
    private func next(_ waiter: State.Waiter) -> Element?? {
        switch withState({ $0.next(waiter) }) {
        case .deliver(let element):
            return .some(element)
        case .suspend:
            return nil
        case .trapSecondConsumer:
            preconditionFailure(
                "\(name): two tasks are waiting in next() on the same \(noun) of the \(loop) at once. An iterator belongs to one task; the second would silently replace the first, which would wait for ever. Give each consumer its own iterator (each iteration makes its own)."
            )
        }
    }

    /// The mailbox's parking spot for waiters pinned to `executor`'s loop: made at the first such
    /// wait and kept for the next ones (a tick sequence waits again and again), one consumer at a
    /// time. Only the consumer touches it.
    private func parkingSpot(for executor: LoopSerialExecutor) -> ParkingSpot<Element> {
        if let spot = parking, spot.executor === executor { return spot }
        let spot = ParkingSpot<Element>(executor, lock: lock)
        parking = spot
        return spot
    }
}

/// What an iterator of the loop's event streams waits on: its mailbox, whatever the mailbox
/// buffers. A class so that ``LoopEventIterator`` is one generic type over the element alone (the
/// buffer types are the module's own); each `next()` is one dynamic call into the specialized
/// `MailboxHandle`.
class MailboxReceiver<Element: Sendable>: @unchecked Sendable {
    // `@unchecked`: no stored state; subclasses are `Sendable` themselves.

    /// The next element in the caller's isolation, or `nil` once the mailbox has finished.
    func receive(isolation actor: isolated (any Actor)?) async -> Element? {
        preconditionFailure("MailboxReceiver.receive: the subclass must override it")
    }
}

/// A sequence iterator's hold on its mailbox: when the last copy of the iterator goes away, the
/// mailbox finishes and its producer is detached. The producer (a timer's or observer's handler)
/// holds the mailbox itself strongly — no weak load per element — and the cycle this makes
/// through the producer's registration is broken when the mailbox finishes.
final class MailboxHandle<Buffer: MailboxBuffer>: MailboxReceiver<Buffer.Element>, @unchecked Sendable {
    // `@unchecked`: `mailbox` is immutable and `Sendable`.
    let mailbox: Mailbox<Buffer>

    init(_ mailbox: Mailbox<Buffer>) {
        self.mailbox = mailbox
    }

    override func receive(isolation actor: isolated (any Actor)?) async -> Buffer.Element? {
        await mailbox.receive(isolation: actor).0
    }

    deinit {
        mailbox.finishUnlessFinished()
    }
}

/// The iterator of a loop's event streams — `LoopTicks`, `LoopActivities`, `LoopStalls`: the next
/// element, waited for in the caller's isolation, until the stream ends.
///
/// A stream ends when its consuming task is cancelled or its loop stops accepting work (its
/// `LoopThread` begins shutting down, or its thread exits), after what was buffered.
///
/// - Important: Belongs to one task: two tasks waiting in `next()` on one iterator at once is a
///   programmer error and traps (the second would otherwise replace the first, which would wait
///   for ever). Copies share the iteration; the stream's producer is detached when the last copy
///   goes away.
public struct LoopEventIterator<Element: Sendable>: AsyncIteratorProtocol {
    let receiver: MailboxReceiver<Element>

    init(_ receiver: MailboxReceiver<Element>) {
        self.receiver = receiver
    }

    /// The next element, or `nil` once the stream ended.
    ///
    /// Runs in the caller's isolation (it is `nonisolated(nonsending)`): an actor pinned to the
    /// loop that calls `await iterator.next()` stays on the loop's thread and is resumed by a job
    /// of the loop, as with `for await`. Only a call through a generic `AsyncIteratorProtocol` that
    /// has no isolation to pass runs on the generic executor.
    public nonisolated(nonsending) mutating func next() async -> Element? {
        await receiver.receive(isolation: #isolation)
    }

    /// The next element, or `nil` once the stream ended; waits in the caller's isolation, so an
    /// actor pinned to the loop is resumed by a job of the loop itself (`for await` uses this).
    public mutating func next(isolation actor: isolated (any Actor)?) async -> Element? {
        await receiver.receive(isolation: actor)
    }
}

/// A stream's mailbox made with the stream, for its first iterator: the producer (an observer, a
/// stall handler) is attached when the stream is made, so what happens between making it and the
/// first `next()` is kept for that iterator (within the buffer's policy). Each further iterator of
/// the same stream value attaches a producer of its own, from then on. A stream that is never
/// iterated detaches its producer when its last copy goes away.
final class FirstIteratorMailbox<Buffer: MailboxBuffer>: Sendable {
    private let pending: ExecutorLocked<Mailbox<Buffer>?>

    init(_ mailbox: Mailbox<Buffer>) {
        pending = ExecutorLocked(mailbox)
    }

    /// The mailbox, for the first caller only.
    func take() -> Mailbox<Buffer>? {
        pending.withLock { $0.take() }
    }

    deinit {
        take()?.finishUnlessFinished()
    }
}

/// Lets a loop's end handler reach a mailbox without keeping it alive.
private final class WeakMailbox<Buffer: MailboxBuffer>: Sendable {
    // Written once in init, before the end handler that reads it is registered.
    nonisolated(unsafe) weak var mailbox: Mailbox<Buffer>?

    init(_ mailbox: Mailbox<Buffer>) {
        self.mailbox = mailbox
    }
}
