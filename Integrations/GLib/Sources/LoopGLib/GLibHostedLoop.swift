import CGLib
import CLoopGLibShims
import LoopRuntime

/// A loop hosted in a GLib main context: a `GSource` that runs the loop's passes in the
/// context's iterations, so that under `g_main_loop_run` — and so under `gtk_application_run` —
/// the loop's timers, sources, observers and blocks run, interleaved with GLib's own sources.
///
/// Host `Loop.main` in GLib's default context with one call, before the GLib or GTK main loop
/// starts, on the main thread:
///
/// ```swift
/// let hosting = try GLibHostedLoop.hostMainLoop()
/// // @MainActor tasks, DispatchQueue.main, Loop.main timers and Loop.main.sleep now run
/// // inside g_main_loop_run / gtk_application_run.
/// g_main_loop_run(mainLoop)
/// hosting.remove()
/// ```
///
/// The source polls the loop's descriptor (``HostedLoop/descriptor``) and takes the loop's next
/// deadline as its timeout, so an idle loop costs GLib nothing: no timeout, no wake-up. See
/// LoopRuntime's "Hosting a loop in another event loop" for what a host promises the loop.
///
/// ### Nested iterations
///
/// - A GLib callback that runs a nested `g_main_loop_run` (a modal dialog's `gtk_dialog_run`
///   shape) keeps the loop running: its iterations dispatch the source like the outer ones, so
///   `@MainActor` jobs, blocks and timers go on while the dialog is up.
/// - A loop callout (a block, a timer, an observer) that iterates the context itself
///   (`g_main_context_iteration`) runs GLib's other sources; the loop is not re-entered — its own
///   queued work waits until the callout returns, and the callout does not trap. A callout that
///   wants the loop's work too runs the loop nested instead (`Loop.run(_:for:)`).
/// - The source may recurse (`g_source_set_can_recurse`) and keeps itself out of nested
///   iterations of its own dispatch: a non-recursive source costs GLib one wake-up of its own
///   after every dispatch.
///
/// - Important: Made, iterated and removed on the loop's thread, which must be the thread that
///   iterates the context. `Sendable` so that the loop's own callouts may remove it.
public final class GLibHostedLoop: @unchecked Sendable {
    // Thread-safety: `hosted` checks on every call that it runs on the loop's thread; `source` is
    // read and written only there too (in `init`, in the GSource's callbacks, in `remove()`).

    /// The hosting: the loop, its driver (switch modes with it), its descriptor.
    public let hosted: HostedLoop

    /// The GLib context the loop runs in (`GMainContext *`); `nil` for GLib's default context.
    public let context: OpaquePointer?

    /// The attached `GSource`, until it is destroyed. Not a reference of ours: the context holds
    /// the source while it is attached, and this is cleared when it is detached (``remove()``, a
    /// dispatch that ended the hosting, the source's finalization).
    private var source: UnsafeMutablePointer<GSource>?

    /// Hosts `loop` in `context` (`nil`: GLib's default context), running `mode`, at `priority`
    /// among the context's sources (GLib's `G_PRIORITY_DEFAULT`, 0, unless told; lower runs first).
    ///
    /// - Throws: `LoopHostingError` if the loop cannot be hosted (see `Loop.beginHosting(forMode:)`).
    /// - Important: Call on the loop's thread.
    public init(
        hosting loop: Loop, in context: OpaquePointer? = nil, mode: Loop.Mode = .default, priority: Int32 = 0
    ) throws(LoopHostingError) {
        hosted = try loop.beginHosting(forMode: mode)
        self.context = context
        var callbacks = CLoopGLibCallbacks(
            prepare: { owner, timeout in GLibHostedLoop.from(owner).prepare(timeout) },
            check: { owner, readable in GLibHostedLoop.from(owner).check(readable: readable != 0) },
            dispatch: { owner in GLibHostedLoop.from(owner).dispatch() },
            finalize: { owner in GLibHostedLoop.released(owner) })
        // The GSource holds one retain of this object, given back in its finalize callback, which
        // GLib calls once, when the source's last reference goes: the object outlives its source.
        let owner = Unmanaged.passRetained(self).toOpaque()
        let source = cloop_glib_source_new(hosted.descriptor, &callbacks, owner)!
        g_source_set_priority(source, priority)
        g_source_attach(source, context)
        g_source_unref(source)  // the context's reference keeps it while attached
        self.source = source
    }

    /// Hosts `Loop.main` in GLib's default context, in `mode` — the one call a GTK program makes
    /// before `gtk_application_run`. On the main thread.
    ///
    /// - Throws: `LoopHostingError` if the main loop cannot be hosted (it runs already, say).
    public static func hostMainLoop(mode: Loop.Mode = .default, priority: Int32 = 0) throws(LoopHostingError)
        -> GLibHostedLoop
    {
        precondition(
            Loop.main.isCurrentThread,
            "GLibHostedLoop.hostMainLoop(): call it on the main thread, which runs GLib's default context and the main loop."
        )
        return try GLibHostedLoop(hosting: .main, in: nil, mode: mode, priority: priority)
    }

    /// The source is attached: ``remove()`` was not called and the hosting did not end.
    ///
    /// - Important: Call on the loop's thread.
    public var isAttached: Bool { source != nil && !hosted.isEnded }

    /// Detaches the source from the context and ends the hosting (``HostedLoop/end()``: nothing
    /// queued is dropped). Idempotent.
    ///
    /// - Returns: `true` if work is still queued for the loop's next run.
    /// - Important: Call on the loop's thread.
    @discardableResult
    public func remove() -> Bool {
        let queued = hosted.end()
        if let source {
            self.source = nil
            g_source_destroy(source)  // finalizes it, which gives back the source's retain of self
        }
        return queued
    }

    // MARK: - The GSource's callbacks (on the context's thread)

    private static func from(_ owner: UnsafeMutableRawPointer?) -> GLibHostedLoop {
        Unmanaged<GLibHostedLoop>.fromOpaque(owner!).takeUnretainedValue()
    }

    private static func released(_ owner: UnsafeMutableRawPointer?) {
        let this = Unmanaged<GLibHostedLoop>.fromOpaque(owner!)
        let object = this.takeUnretainedValue()
        object.source = nil
        if !object.hosted.isEnded { object.hosted.end() }  // the context went away with the source in it
        this.release()
    }

    private func prepare(_ timeout: UnsafeMutablePointer<gint>?) -> gboolean {
        let wait = hosted.prepare()
        timeout?.pointee = wait.timeoutMilliseconds
        switch wait {
        case .dispatchNow, .ended: return 1  // an ended hosting is dispatched once, to remove it
        case .untilReadable: return 0
        }
    }

    private func check(readable: Bool) -> gboolean {
        if readable { return 1 }
        // The deadline came without the descriptor (GLib's own timeout ended the poll first).
        return hosted.prepare().timeoutMilliseconds == 0 ? 1 : 0
    }

    private func dispatch() -> gboolean {
        hosted.dispatch()
        guard hosted.isEnded else { return 1 }
        source = nil  // GLib destroys it on this answer
        return 0
    }
}

/// The version of GLib this package was built against, `"major.minor.micro"`.
///
/// - Important: Safe from any thread.
public var glibVersion: String { String(cString: cloop_glib_version()) }
