import CLoopRuntimeShims
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A port to which any thread sends messages, delivered on a loop's thread (SPEC R54) — the
/// NSPort/NSMachPort idea, backed by an eventfd watched as a descriptor source.
///
/// Messages are delivered in send order (one FIFO for all senders, so each sender's messages keep
/// their order), on the thread of the loop the port was added to, while that loop runs one of the
/// port's modes. A burst of sends costs one eventfd write and one wake-up: the eventfd is written
/// only when the port goes from idle to signalled. An idle port keeps its modes alive (SPEC R10),
/// which is how a resident thread's loop stays up with nothing to do.
///
/// ```swift
/// let port = try LoopPort<Request> { request in handle(request) }
/// try serverLoop.add(port, forMode: .default)
/// // any thread:
/// try port.send(request)
/// ```
///
/// Delivery performs the port's descriptor source, so it counts as a handled source (SPEC R15).
///
/// - Important: Safe from any thread. The handler runs on the loop's thread.
public final class LoopPort<Message: Sendable>: @unchecked Sendable {
    // Thread-safety: `eventFD`, `source` and `handler` are immutable; `state` is guarded by its
    // mutex. The eventfd is closed once, under that mutex, after the source stopped watching it.

    /// Why a send failed.
    public enum SendError: Error, Sendable, Hashable, CustomStringConvertible {
        /// The port was invalidated.
        case invalidated
        /// The thread of the port's loop has exited; nothing would ever deliver the message.
        case loopEnded(loop: String)

        /// A sentence for logs.
        public var description: String {
            switch self {
            case .invalidated: "the port was invalidated"
            case .loopEnded(let loop): "the \(loop) has ended (its thread exited or its LoopThread shut down)"
            }
        }
    }

    private struct State {
        var messages: [Message] = []
        var spare: [Message] = []
        /// The eventfd was written and the delivery has not taken the messages yet.
        var signalled = false
        var failure: SendError? = nil
    }

    private let eventFD: Int32
    private let state = Locked(State())
    private let handler: @Sendable (Message) -> Void
    /// The descriptor source that delivers the messages.
    let source: LoopDescriptorSource

    /// Creates a port with its eventfd.
    ///
    /// - Parameters:
    ///   - order: The order of the port's descriptor source among those ready in one pass.
    ///   - label: The name of the port's deliveries (descriptor-source callouts) in stall reports
    ///     and traces. Defaults to none.
    ///   - handler: Called on the loop's thread with each message, in send order.
    /// - Throws: ``LoopSystemError`` if the eventfd cannot be created (e.g. `EMFILE`).
    public init(
        order: Int = 0, label: StaticString? = nil, _ handler: @escaping @Sendable (Message) -> Void
    ) throws(LoopSystemError) {
        let eventFD = try retryingSyscall("eventfd") { cloop_eventfd_create() }
        self.eventFD = eventFD
        self.handler = handler
        let box = WeakPortBox<Message>()
        let endAware = EndAwareReference()
        source = LoopDescriptorSource(
            descriptor: eventFD, events: .readable, order: order, label: label, endAware: endAware,
            { _, _ in box.port?.deliver() })
        box.port = self
        endAware.target = self
    }

    deinit {
        source.invalidate()
        state.withLock { _ in _ = Glibc.close(eventFD) }
    }

    /// False once the port was invalidated or its loop's thread exited.
    ///
    /// - Important: Safe from any thread.
    public var isValid: Bool { state.withLock { $0.failure == nil } }

    /// The number of messages sent and not yet delivered.
    ///
    /// - Important: Safe from any thread.
    public var pendingCount: Int { state.withLock { $0.messages.count } }

    /// Queues `message` for delivery on the loop's thread, waking the loop if it sleeps.
    ///
    /// - Throws: ``SendError`` if the port was invalidated or its loop's thread has exited: the
    ///   message was not queued.
    /// - Important: Safe from any thread.
    public func send(_ message: Message) throws(SendError) {
        let mustSignal: Bool = try state.withLock { (state) throws(SendError) in
            if let failure = state.failure { throw failure }
            state.messages.append(message)
            if state.signalled { return false }
            state.signalled = true
            return true
        }
        if mustSignal {
            _ = cloop_eventfd_signal(eventFD)
        }
    }

    /// Removes the port from its loop and closes it: later sends throw ``SendError/invalidated``.
    ///
    /// - Returns: The messages that were sent but not delivered, in send order (nothing is dropped
    ///   silently).
    /// - Important: Safe from any thread.
    @discardableResult
    public func invalidate() -> [Message] {
        source.invalidate()
        return state.withLock { state in
            if state.failure == nil { state.failure = .invalidated }
            let undelivered = state.messages
            state.messages.removeAll()
            return undelivered
        }
    }

    /// The port's source was performed: reset the eventfd, then take and deliver every message.
    private func deliver() {
        _ = cloop_eventfd_drain(eventFD)
        var batch: [Message] = state.withLock {
            $0.signalled = false
            let batch = $0.messages
            $0.messages = $0.spare
            $0.spare = []
            return batch
        }
        for message in batch {
            handler(message)
        }
        batch.removeAll(keepingCapacity: true)
        state.withLock { if $0.spare.isEmpty { $0.spare = batch } }
    }

}

extension LoopPort: LoopEndAware {
    var hasQueuedWork: Bool { state.withLock { !$0.messages.isEmpty } }

    /// The loop is sealing: refuse further sends if no message is queued and the rest agree.
    func sealIfIdle(_ end: LoopEndNotice, rest: () -> Bool) -> Bool {
        state.withLock {
            guard $0.messages.isEmpty, rest() else { return false }
            if $0.failure == nil { $0.failure = .loopEnded(loop: end.loopName) }
            return true
        }
    }

    /// The loop ended (or refused the port): refuse further sends.
    func loopEnded(_ end: LoopEndNotice) {
        state.withLock {
            if $0.failure == nil { $0.failure = .loopEnded(loop: end.loopName) }
        }
    }
}

/// Lets the port's source reach the port without a reference cycle (the port owns the source).
private final class WeakPortBox<Message: Sendable>: @unchecked Sendable {
    // Written once in LoopPort.init before the source can be performed; read after.
    weak var port: LoopPort<Message>?
}

extension Loop {
    /// Adds `port` to `mode` (every common mode for ``Mode/common``): its messages are delivered
    /// while this loop runs one of the port's modes (SPEC R54).
    ///
    /// A loop that is shutting down or has ended refuses the port: it can never deliver, so the port
    /// is invalidated at once and a ``LoopPort/send(_:)`` throws ``LoopPort/SendError/loopEnded(loop:)``.
    ///
    /// - Throws: ``LoopSystemError`` if the port's eventfd cannot be watched.
    /// - Precondition: `port` is not already bound to another loop.
    /// - Important: Safe from any thread.
    public func add<Message>(_ port: LoopPort<Message>, forMode mode: Mode) throws(LoopSystemError) {
        if try !addDescriptorSource(port.source, forMode: mode) {
            port.loopEnded(lock.withLock { endNoticeLocked() })
        }
    }

    /// Removes `port` from `mode`. Messages wait until the port is in a running mode again.
    ///
    /// - Important: Safe from any thread.
    public func remove<Message>(_ port: LoopPort<Message>, forMode mode: Mode) {
        remove(port.source, forMode: mode)
    }

    /// True if `port` is in `mode`.
    ///
    /// - Important: Safe from any thread.
    public func contains<Message>(_ port: LoopPort<Message>, forMode mode: Mode) -> Bool {
        contains(port.source, forMode: mode)
    }
}
