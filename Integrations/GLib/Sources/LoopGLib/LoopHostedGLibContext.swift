import CGLib
import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// A GLib main context run by a loop: the context's descriptors (from `g_main_context_query`)
/// are descriptor sources of the loop, its timeout is a loop timer, and its sources are dispatched
/// in the loop's passes — in the modes you pick, so GLib and GIO callbacks pause while the loop
/// runs another mode (a tracking mode, a modal run) and resume when it is back.
///
/// ```swift
/// let context = g_main_context_new()
/// let glib = try LoopHostedGLibContext(context, loop: .current, inModes: [.default])
/// // GLib sources attached to `context` now run inside Loop.current's passes.
/// Loop.current.run(.default, for: .seconds(5))
/// glib.remove()
/// ```
///
/// The loop's thread owns the context while hosted (`g_main_context_acquire`): another thread
/// cannot iterate it meanwhile. One iteration of the context is one GLib cycle —
/// prepare, query, wait (the loop's), check, dispatch — made when one of its descriptors is ready,
/// its timeout comes, or a source is ready at once (an idle source: then the loop does not wait).
/// Before each wait of the loop the context is prepared and queried again, so sources attached
/// by the loop's own callouts are seen.
///
/// - Important: Made and removed on the loop's thread; the context's callbacks run there.
///   `Sendable` so that the loop's own callouts may remove it.
public final class LoopHostedGLibContext: @unchecked Sendable {
    // Thread-safety: every mutable field is touched only on the loop's thread — in `init`, in the
    // loop's callouts (the source, timer and descriptor handlers) and in `remove()`, each of which
    // checks it runs there.

    /// Why a context could not be hosted.
    public enum HostingError: Error, Sendable, Hashable {
        /// Another thread owns the context (`g_main_context_acquire` failed): it iterates it.
        case contextOwnedElsewhere
    }

    /// The hosted context (`GMainContext *`).
    public let context: OpaquePointer
    /// The loop that runs it.
    public let loop: Loop
    /// The loop modes in which the context's sources run.
    public let modes: [Loop.Mode]

    /// Runs one GLib cycle in a pass of the loop; signalled when a descriptor is ready, the timeout
    /// came, or a GLib source is ready at once.
    private var cycle: LoopSource!
    private var timeout: LoopTimer!
    /// Prepares and queries the context again before each wait of the loop: a GLib source the
    /// loop's own thread attached meanwhile (from a callout, say) does not wake the context, as
    /// GLib expects its owner to prepare again before it polls.
    private var refresh: LoopObserver!
    /// The loop's descriptor sources for the context's descriptors, by descriptor.
    private var watched: [Int32: (source: LoopDescriptorSource, events: LoopDescriptorSource.Events)] = [:]
    /// The descriptors of the last query, whose `revents` the check reads.
    private var polled: [GPollFD] = []
    private var maxPriority: gint = 0
    private var prepared = false
    private var removed = false

    /// Hosts `context` in `loop`, in `modes`.
    ///
    /// - Throws: ``HostingError/contextOwnedElsewhere`` if another thread owns the context.
    /// - Important: Call on the loop's thread.
    public init(_ context: OpaquePointer, loop: Loop = .current, inModes modes: [Loop.Mode] = [.default])
        throws(HostingError)
    {
        precondition(
            loop.isCurrentThread,
            "LoopHostedGLibContext: make it on the loop's thread, which will own and iterate the GLib context.")
        precondition(!modes.isEmpty, "LoopHostedGLibContext: the mode list is empty, so the context could never run.")
        guard g_main_context_acquire(context) != 0 else { throw .contextOwnedElsewhere }
        g_main_context_ref(context)
        self.context = context
        self.loop = loop
        self.modes = modes
        // The handlers hold this object weakly: the loop's items must not keep it alive, nor it
        // them past `remove()`.
        cycle = LoopSource(label: "GLib context") { [weak self] in self?.iterate() }
        timeout = LoopTimer(
            fireAt: .now + .seconds(86_400 * 365), interval: .seconds(86_400 * 365), label: "GLib timeout"
        ) { [weak self] _ in self?.cycle.signal() }
        refresh = LoopObserver(activities: .beforeWaiting, order: Int.max) { [weak self] _, _ in
            self?.prepareAndQuery()
        }
        for mode in modes {
            loop.add(cycle, forMode: mode)
            loop.add(timeout, forMode: mode)
            loop.add(refresh, forMode: mode)
        }
        prepareAndQuery()
    }

    deinit {
        precondition(
            removed,
            "LoopHostedGLibContext released without remove(): the GLib context is still owned by the loop's thread.")
    }

    /// Stops running the context in the loop: the loop's items go, and the context is released
    /// (`g_main_context_release`), so that another thread may iterate it. Idempotent.
    ///
    /// - Important: Call on the loop's thread.
    public func remove() {
        precondition(loop.isCurrentThread, "LoopHostedGLibContext.remove(): call it on the loop's thread.")
        guard !removed else { return }
        removed = true
        cycle.invalidate()
        timeout.invalidate()
        refresh.invalidate()
        for entry in watched.values { entry.source.invalidate() }
        watched.removeAll()
        g_main_context_release(context)
        g_main_context_unref(context)
    }

    // MARK: - One GLib cycle

    /// Check and dispatch for the last query, then prepare and query for the next wait.
    private func iterate() {
        guard !removed else { return }
        if prepared {
            prepared = false
            // The loop waited on the descriptors; their readiness, as GLib wants it, comes from a
            // poll that does not block.
            if !polled.isEmpty { _ = g_poll(&polled, guint(polled.count), 0) }
            if g_main_context_check(context, maxPriority, &polled, gint(polled.count)) != 0 {
                g_main_context_dispatch(context)
            }
        }
        if !removed { prepareAndQuery() }  // a dispatched callback may have removed the hosting
    }

    private func prepareAndQuery() {
        guard !removed else { return }
        var priority: gint = 0
        let ready = g_main_context_prepare(context, &priority) != 0
        maxPriority = priority
        var wait: gint = -1
        var capacity = max(polled.count, 8)
        while true {
            polled = [GPollFD](repeating: GPollFD(), count: capacity)
            let count = Int(g_main_context_query(context, priority, &wait, &polled, gint(capacity)))
            if count <= capacity {
                polled.removeLast(capacity - count)
                break
            }
            capacity = count
        }
        prepared = true
        watch(polled)
        if ready || wait == 0 {
            cycle.signal()  // ready now: the next pass runs the cycle without waiting
        } else if wait > 0 {
            timeout.setFireDate(.now + .milliseconds(Int64(wait)))
        } else {
            timeout.setFireDate(.now + .seconds(86_400 * 365))
        }
    }

    /// Makes the loop watch exactly `descriptors`, with their events.
    private func watch(_ descriptors: [GPollFD]) {
        var wanted: [Int32: LoopDescriptorSource.Events] = [:]
        for descriptor in descriptors {
            var events: LoopDescriptorSource.Events = []
            if descriptor.events & UInt16(G_IO_IN.rawValue | G_IO_PRI.rawValue) != 0 { events.insert(.readable) }
            if descriptor.events & UInt16(G_IO_OUT.rawValue) != 0 { events.insert(.writable) }
            if events.isEmpty { events = .readable }  // errors and hang-ups are reported anyway
            wanted[descriptor.fd, default: []].formUnion(events)
        }
        for (fd, entry) in watched where wanted[fd] != entry.events {
            entry.source.invalidate()
            watched[fd] = nil
        }
        for (fd, events) in wanted where watched[fd] == nil {
            let source = LoopDescriptorSource(descriptor: fd, events: events, label: "GLib descriptor") {
                [weak self] _, _ in self?.cycle.signal()
            }
            do {
                for mode in modes { try loop.add(source, forMode: mode) }
                watched[fd] = (source, events)
            } catch {
                // A descriptor epoll refuses (a regular file): GLib polls it as always ready.
                cycle.signal()
            }
        }
    }
}

extension LoopHostedGLibContext {
    /// Hosts `context` in `loop`, in `modes`: the spelling before `init(_:loop:inModes:)`.
    @available(*, deprecated, renamed: "init(_:loop:inModes:)")
    public convenience init(_ context: OpaquePointer, loop: Loop = .current, modes: [Loop.Mode]) throws(HostingError) {
        try self.init(context, loop: loop, inModes: modes)
    }
}
