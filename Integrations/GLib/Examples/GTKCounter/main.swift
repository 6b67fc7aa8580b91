// GTKCounter — a GTK 4 window whose click handler is @MainActor async code: it awaits
// Loop.main.sleep and an actor pinned to a worker LoopThread, then updates the label. GTK owns the
// main thread (gtk_application_run); GLibHostedLoop hosts Loop.main in GLib's default context, so
// main-actor work, DispatchQueue.main and main-loop timers run inside GTK's main loop.
//
//   swift run GTKCounter                        (needs a display; GSK_RENDERER=cairo without GL)
//   swift run GTKCounter --self-test            (clicks its own button, checks the label, exits)
//   swift run GTKCounter --wait-for-click       (the same, but a real click must come: xdotool)

import CGTK
import Dispatch
import LoopExecutor
import LoopGLib
import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// The worker: an actor pinned to a resident loop thread (a thread-affine library would live here).
actor Tally: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    private var total = 0

    init(_ thread: LoopThread) { loopExecutor = LoopExecutor(loop: thread.loop) }

    /// Counts one click; returns the new total and whether it ran on the worker's thread.
    func add() -> (total: Int, onWorker: Bool) {
        total += 1
        return (total, loopExecutor.loop.isCurrentThread)
    }
}

/// The window's state, on the main actor.
@MainActor final class Counter {
    static var shared: Counter?
    let label: UnsafeMutablePointer<GtkWidget>
    let button: UnsafeMutablePointer<GtkWidget>
    let tally: Tally
    var updates = 0

    init(label: UnsafeMutablePointer<GtkWidget>, button: UnsafeMutablePointer<GtkWidget>, tally: Tally) {
        self.label = label
        self.button = button
        self.tally = tally
    }

    /// The click handler: main-actor async code inside GTK's main loop.
    func clicked() async {
        setLabel("Counting…")
        try? await Loop.main.sleep(for: .milliseconds(150))  // a main-loop timer
        let (total, onWorker) = await tally.add()  // a hop to the pinned actor and back
        precondition(Loop.main.isCurrentThread, "back on the main thread after the hop")
        setLabel("Clicked \(total) time\(total == 1 ? "" : "s")\(onWorker ? "" : " (off the worker?)")")
        updates += 1
        if selfTest { finishSelfTest() }
    }

    var text: String { String(cString: gtk_label_get_text(OpaquePointer(label))) }

    func setLabel(_ text: String) {
        gtk_label_set_text(OpaquePointer(label), text)
        print("label: \(text)")
    }

    func finishSelfTest() {
        // Leave the window up a moment (for a screenshot), then quit.
        Task { @MainActor in
            try? await Loop.main.sleep(for: .milliseconds(selfTestLinger))
            g_application_quit(application.withMemoryRebound(to: GApplication.self, capacity: 1) { $0 })
        }
    }
}

let clicksItself = CommandLine.arguments.contains("--self-test")
let selfTest = clicksItself || CommandLine.arguments.contains("--wait-for-click")
let selfTestLinger = Int64(environment("GTKCOUNTER_LINGER_MS") ?? "") ?? 300
let worker = try LoopThread(name: "tally")
let tally = Tally(worker)

// The one call: Loop.main runs inside GLib's default context from now on.
let hosting = try GLibHostedLoop.hostMainLoop()

nonisolated(unsafe) let application = gtk_application_new("org.loopruntime.GTKCounter", G_APPLICATION_NON_UNIQUE)!

let onClicked: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { _, _ in
    // GTK calls signal handlers on the main thread, inside a pass of its main loop.
    MainActor.assumeIsolated {
        guard let counter = Counter.shared else { return }
        Task { @MainActor in await counter.clicked() }
    }
}

let onActivate: @convention(c) (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?) -> Void = { app, _ in
    MainActor.assumeIsolated {
        let window = gtk_application_window_new(app?.assumingMemoryBound(to: GtkApplication.self))!
        gtk_window_set_title(cast(window), "GTKCounter")
        gtk_window_set_default_size(cast(window), 320, 160)
        let box = gtk_box_new(GTK_ORIENTATION_VERTICAL, 12)!
        let label = gtk_label_new("Not clicked yet")!
        let button = gtk_button_new_with_label("Count")!
        gtk_widget_set_vexpand(button, 1)  // the lower part of the window: easy to click
        gtk_box_append(cast(box), label)
        gtk_box_append(cast(box), button)
        gtk_window_set_child(cast(window), box)
        g_signal_connect_data(
            button, "clicked", unsafeBitCast(onClicked, to: GCallback.self), nil, nil, GConnectFlags(0))
        Counter.shared = Counter(label: label, button: button, tally: tally)
        gtk_window_present(cast(window))
        if clicksItself {
            // Click the button the way a user would, once the window is up: from a main-loop timer.
            Loop.main.perform(after: .milliseconds(500), inModes: [.default]) {
                MainActor.assumeIsolated {
                    guard let counter = Counter.shared else { return }
                    print("self-test: clicking the button")
                    _ = gtk_widget_activate(counter.button)
                }
            }
        }
    }
}

g_signal_connect_data(
    application, "activate", unsafeBitCast(onActivate, to: GCallback.self), nil, nil, GConnectFlags(0))
let status = g_application_run(application.withMemoryRebound(to: GApplication.self, capacity: 1) { $0 }, 0, nil)
let leftOver = hosting.remove()
g_object_unref(application)
worker.shutdown()

if selfTest {
    let text = MainActor.assumeIsolated { Counter.shared?.text ?? "" }
    let ok = status == 0 && text == "Clicked 1 time" && !leftOver
    print(
        ok ? "self-test passed: the label reads \"\(text)\"" : "self-test FAILED: status \(status), label \"\(text)\"")
    exit(ok ? 0 : 1)
}
exit(status)

/// GTK's C casts (`GTK_WINDOW(widget)`, …) are macros, which Swift cannot call: the same pointer
/// as the type a function takes.
func cast<T>(_ widget: UnsafeMutablePointer<GtkWidget>) -> UnsafeMutablePointer<T> {
    UnsafeMutableRawPointer(widget).assumingMemoryBound(to: T.self)
}

func environment(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
