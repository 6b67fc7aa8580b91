import CLoopRuntimeShims
import Synchronization

/// A source performed when a file descriptor is ready to read or write: CFRunLoop's "version 1"
/// source, on Linux an epoll registration (SPEC G).
///
/// While the loop runs one of the source's modes and the descriptor is ready, the loop performs the
/// source in step 10 of the pass, after the timers, telling it which readiness fired (SPEC R53).
/// Every descriptor source that is ready after one wait is performed in that pass (SPEC M3), and a
/// performed descriptor source counts as a handled source (SPEC R15). A descriptor source keeps its
/// modes alive (SPEC R10).
///
/// Readiness is level-triggered: as long as the descriptor stays readable, the source is performed
/// in every pass of one of its modes, so read until `EAGAIN` or accept being called again. If the
/// descriptor becomes ready while the loop runs another mode, the loop stops watching it until it
/// runs one of the source's modes again, so a ready descriptor never makes a loop spin in a mode it
/// does not belong to.
///
/// ```swift
/// let source = LoopDescriptorSource(descriptor: socket, events: .readable) { _, events in
///     if events.contains(.readable) { drain(socket) }
/// }
/// try loop.add(source, forMode: .default)
/// ```
///
/// The source does not own the descriptor. **Remove or invalidate the source before closing the
/// descriptor**: closing a registered descriptor is a programmer error (SPEC R53), and the loop
/// traps with a message saying so when it next touches the registration.
///
/// A descriptor source belongs to the first loop it is added to, in any number of that loop's
/// modes; adding it to another loop is a programmer error (as for timers, SPEC M6).
///
/// - Important: Safe from any thread: create, add, remove and invalidate from anywhere. The
///   handler runs on the loop's thread.
public final class LoopDescriptorSource: @unchecked Sendable {
    // Thread-safety: `descriptor`, `order`, `label`, `handler` and `endAwareReference` are immutable.
    // `sharedState` is guarded by the source's stripe lock; `valid` is an atomic that only changes
    // under it. `watchedEvents` is an atomic written under the bound loop's lock (under the stripe
    // lock while the source is unbound). `modes`, `token`, `isWatching` and `pendingEvents` are
    // guarded by the bound loop's lock. Lock order: loop lock, then the stripe lock.

    /// Readiness of a descriptor.
    ///
    /// - Important: A value type; safe from any thread.
    public struct Events: OptionSet, Hashable, Sendable, CustomStringConvertible {
        /// The bits.
        public let rawValue: UInt32

        /// Creates a set from its bits.
        public init(rawValue: UInt32) {
            self.rawValue = rawValue
        }

        /// Data can be read (or a peer closed its end: a read returns 0).
        public static let readable = Events(rawValue: 1 << 0)
        /// Data can be written.
        public static let writable = Events(rawValue: 1 << 1)
        /// An error is pending on the descriptor (reported even if not asked for).
        public static let error = Events(rawValue: 1 << 2)
        /// The peer hung up (reported even if not asked for).
        public static let hangUp = Events(rawValue: 1 << 3)

        /// `readable`, `writable`, `error`, `hangUp`, joined by `|`.
        public var description: String {
            let names: [(Events, String)] = [
                (.readable, "readable"), (.writable, "writable"), (.error, "error"), (.hangUp, "hangUp"),
            ]
            return names.filter { contains($0.0) }.map(\.1).joined(separator: "|")
        }

        /// The epoll flags to watch for these events.
        var epollFlags: UInt32 {
            (contains(.readable) ? CLOOP_EPOLLIN | CLOOP_EPOLLRDHUP : 0)
                | (contains(.writable) ? CLOOP_EPOLLOUT : 0)
        }

        /// The events that epoll `flags` report.
        init(epollFlags flags: UInt32) {
            var events: Events = []
            if flags & (CLOOP_EPOLLIN | CLOOP_EPOLLRDHUP) != 0 { events.insert(.readable) }
            if flags & CLOOP_EPOLLOUT != 0 { events.insert(.writable) }
            if flags & CLOOP_EPOLLERR != 0 { events.insert(.error) }
            if flags & CLOOP_EPOLLHUP != 0 { events.formUnion([.hangUp, .readable]) }
            self = events
        }
    }

    /// The watched descriptor. Not owned: the source never closes it.
    public let descriptor: Int32
    /// What the source waits for now: `.readable`, `.writable` or both. Changed by
    /// ``setEvents(_:)``.
    ///
    /// - Important: Safe from any thread.
    public var events: Events { Events(rawValue: watchedEvents.load(ordering: .acquiring)) }
    let watchedEvents: Atomic<UInt32>
    /// Among descriptor sources ready in the same pass, lower orders are performed first.
    public let order: Int
    /// The name of the source's callouts in metrics, stall reports and traces, if it has one.
    public let label: StaticString?
    let handler: @Sendable (LoopDescriptorSource, Events) -> Void
    /// The port this source delivers for, told when the loop ends (see `LoopEndAware`).
    let endAwareReference: EndAwareReference?
    var endAware: (any LoopEndAware)? { endAwareReference?.target }

    /// Guarded by the source's stripe lock (`withShared`).
    @exclusivity(unchecked) private var sharedState = LoopBinding()
    let valid = Atomic<Bool>(true)

    /// Runs `body` on the shared state with the source's stripe lock held. Never nest two.
    @inline(__always)
    func withShared<R>(_ body: (inout LoopBinding) -> R) -> R {
        LockStripes.lock(for: self).withLock { body(&sharedState) }
    }

    /// The concrete modes of the bound loop the source is in; guarded by that loop's lock, as are
    /// the fields below.
    @exclusivity(unchecked) var modes = ModeList()
    /// The epoll token while registered with the bound loop's waiter; 0 when not registered.
    @exclusivity(unchecked) var token: UInt64 = 0
    /// In the waiter's epoll set (registered and not paused).
    @exclusivity(unchecked) var isWatching = false
    /// Readiness reported by the last wait and not yet performed.
    @exclusivity(unchecked) var pendingEvents: Events = []
    /// In how many waits in a row the source was reported ready, and the last of them (the check
    /// for a descriptor closed while registered, SPEC R53).
    @exclusivity(unchecked) var readyStreak = 0
    /// The wait of `readyStreak`'s last report.
    @exclusivity(unchecked) var lastReadyWait = 0

    /// Creates a descriptor source.
    ///
    /// - Parameters:
    ///   - descriptor: The descriptor to watch (a socket, pipe, eventfd, timerfd, …; not a regular
    ///     file, which epoll rejects with `EPERM` when the source is added).
    ///   - events: `.readable`, `.writable`, or both.
    ///   - order: Among descriptor sources ready in the same pass, lower orders go first.
    ///   - label: The name of the source's callouts in stall reports and traces (a static string:
    ///     no allocation). Defaults to none.
    ///   - handler: Called on the loop's thread with the source and the readiness that fired.
    /// - Precondition: `descriptor` is not negative and `events` asks for reading or writing.
    public convenience init(
        descriptor: Int32,
        events: Events,
        order: Int = 0,
        label: StaticString? = nil,
        _ handler: @escaping @Sendable (LoopDescriptorSource, Events) -> Void
    ) {
        self.init(descriptor: descriptor, events: events, order: order, label: label, endAware: nil, handler)
    }

    init(
        descriptor: Int32,
        events: Events,
        order: Int,
        label: StaticString? = nil,
        endAware: EndAwareReference?,
        _ handler: @escaping @Sendable (LoopDescriptorSource, Events) -> Void
    ) {
        precondition(
            descriptor >= 0, "LoopDescriptorSource: descriptor \(descriptor) is not a valid descriptor.")
        precondition(
            !events.intersection([.readable, .writable]).isEmpty,
            "LoopDescriptorSource: events must contain .readable or .writable, got [\(events)].")
        self.descriptor = descriptor
        self.watchedEvents = Atomic(events.intersection([.readable, .writable]).rawValue)
        self.order = order
        self.label = label
        self.handler = handler
        self.endAwareReference = endAware
    }

    /// Changes what the source waits for, in place: the descriptor's registration is updated, the
    /// source stays in its modes and keeps its place among them.
    ///
    /// The usual use is a non-blocking writer. Wait for `.readable` only; when a write returns
    /// `EAGAIN`, ask for `[.readable, .writable]`; when the pending output is written, go back to
    /// `.readable` — no removing and re-adding the source at every turn.
    ///
    /// ```swift
    /// // In the handler, on the loop's thread:
    /// if events.contains(.writable) && connection.flush() == .drained {
    ///     try source.setEvents(.readable)
    /// }
    /// ```
    ///
    /// It takes effect at once, even for a loop blocked in its wait: a readiness it now asks for
    /// wakes that wait. Readiness it no longer asks for is not reported from then on (an `.error`
    /// or `.hangUp` always is). Called on another thread while the loop is in the middle of the
    /// source's handler, the handler still sees the readiness it was called for. Setting the
    /// events it already has is cheap and does nothing; on a source that is invalid or was never
    /// added, it only records the events.
    ///
    /// - Parameter events: `.readable`, `.writable`, or both.
    /// - Throws: ``LoopSystemError`` from `epoll_ctl` if the kernel refuses the change (`ENOMEM`);
    ///   the source then keeps its previous events.
    /// - Precondition: `events` asks for reading or writing: to stop watching the descriptor,
    ///   remove the source from its modes or invalidate it. The descriptor has not been closed
    ///   while the source is registered (SPEC R53).
    /// - Important: Safe from any thread, including the source's own handler.
    public func setEvents(_ events: Events) throws(LoopSystemError) {
        precondition(
            !events.intersection([.readable, .writable]).isEmpty,
            "LoopDescriptorSource.setEvents(_:) on descriptor \(descriptor): events must contain .readable or .writable, got [\(events)]. To stop watching the descriptor, remove the source from its modes or invalidate it."
        )
        let wanted = events.intersection([.readable, .writable])
        // Unbound: recorded under the stripe lock, so that an `add` on another thread (which binds
        // under the same lock) either sees the new events or finds the source bound here.
        let loop: Loop? = withShared { binding in
            guard let loop = binding.loop else {
                watchedEvents.store(wanted.rawValue, ordering: .releasing)
                return nil
            }
            return loop
        }
        try loop?.changeEvents(of: self, to: wanted)
    }

    /// The readiness in epoll `flags` that this source reports: what it waits for, and errors
    /// and hang-ups always. Called with the bound loop's lock held.
    func reportedEvents(epollFlags flags: UInt32) -> Events {
        Events(epollFlags: flags).intersection(events.union([.error, .hangUp]))
    }

    /// False once the source was invalidated.
    ///
    /// - Important: Safe from any thread.
    public var isValid: Bool { valid.load(ordering: .acquiring) }

    /// Removes the source from every mode of its loop and stops watching the descriptor. It is never
    /// performed again. Idempotent. Call it (or remove the source) before closing the descriptor.
    ///
    /// When it returns, the handler is not running and will not run again — unless you call it on
    /// the loop's thread (from the handler itself or another callout: it returns at once), or while
    /// the handler runs a nested run of the loop. Called on another thread while the loop is in the
    /// middle of the handler, it waits for the handler to return; so the handler must not wait for
    /// the thread that invalidates it.
    ///
    /// - Important: Safe from any thread, including the source's own handler.
    public func invalidate() { invalidateBoundItem() }
}

extension LoopDescriptorSource: LoopBoundCalloutItem {
    var isValidForCallout: Bool { valid.load(ordering: .sequentiallyConsistent) }
    func clearValidity() { valid.store(false, ordering: .sequentiallyConsistent) }
    func leaveModes(of loop: Loop) { loop.removeInvalidated(self) }
}

extension LoopDescriptorSource: LoopBoundItem {
    static var itemName: String { "LoopDescriptorSource" }
    static var bindingRule: String { "R53" }

    func withBinding<R>(_ body: (inout LoopBinding, _ isValid: Bool) -> R) -> R {
        withShared { body(&$0, valid.load(ordering: .relaxed)) }
    }
}

/// A weak reference from a descriptor source to the port that owns it (the port owns the source).
final class EndAwareReference: @unchecked Sendable {
    // Written once, by the port's initializer, before the source is added to a loop; read after.
    weak var target: (any LoopEndAware)?
}
