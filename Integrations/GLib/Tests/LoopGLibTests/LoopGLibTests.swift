import CGLib
import LoopGLib
import LoopRuntime
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// A log the tests compare exactly.
final class Events: Sendable {
    private let events = Mutex<[String]>([])
    func append(_ event: String) { events.withLock { $0.append(event) } }
    var all: [String] { events.withLock { $0 } }
}

/// Runs `body` on a new thread, with a new GLib context as that thread's default, and waits.
func onGLibThread(_ body: @escaping @Sendable (OpaquePointer) -> Void) {
    var thread = pthread_t()
    final class Box: @unchecked Sendable {  // handed to the thread once, read there only
        let body: @Sendable (OpaquePointer) -> Void
        init(_ body: @escaping @Sendable (OpaquePointer) -> Void) { self.body = body }
    }
    // The retain travels with the thread's argument; the thread takes it back, once.
    let box = Unmanaged.passRetained(Box(body)).toOpaque()
    let created = pthread_create(
        &thread, nil,
        { raw in
            let box = Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue()
            let context = g_main_context_new()!
            g_main_context_push_thread_default(context)
            box.body(context)
            g_main_context_pop_thread_default(context)
            g_main_context_unref(context)
            return nil
        }, box)
    precondition(created == 0, "pthread_create: \(created)")
    pthread_join(thread, nil)
}

/// A GLib timeout source on `context` that calls `body` once after `milliseconds`.
func glibTimeout(_ context: OpaquePointer, _ milliseconds: UInt32, _ body: @escaping () -> Void) {
    let source = g_timeout_source_new(milliseconds)!
    attach(source, context, body)
}

/// A GLib idle source on `context` that calls `body` once.
func glibIdle(_ context: OpaquePointer, _ body: @escaping () -> Void) {
    attach(g_idle_source_new()!, context, body)
}

private final class Callback {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}

private func attach(_ source: UnsafeMutablePointer<GSource>, _ context: OpaquePointer, _ body: @escaping () -> Void) {
    // The source holds the retain as its callback data; GLib gives it back through the destroy
    // notify, once, when the source is freed — after its last call of the callback.
    let callback = Unmanaged.passRetained(Callback(body)).toOpaque()
    g_source_set_callback(
        source,
        { raw in
            Unmanaged<Callback>.fromOpaque(raw!).takeUnretainedValue().body()
            return 0  // G_SOURCE_REMOVE
        }, callback, { raw in Unmanaged<Callback>.fromOpaque(raw!).release() })
    g_source_attach(source, context)
    g_source_unref(source)
}

/// Iterates `context` (blocking) until `done` or 10 s.
func iterate(_ context: OpaquePointer, until done: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + .seconds(10)
    while !done() {
        if ContinuousClock.now > deadline { return false }
        g_main_context_iteration(context, 1)
    }
    return true
}

@Suite("A loop hosted in a GLib context", .timeLimit(.minutes(2)))
struct GLibHostedLoopTests {
    @Test("GLib idle and timeout sources interleave with loop blocks and timers, in time order")
    func ordering() {
        let events = Events()
        onGLibThread { context in
            let loop = Loop.current
            let hosting = try! GLibHostedLoop(hosting: loop, in: context)
            loop.perform(inModes: [.default]) { events.append("loop block") }
            glibIdle(context) { events.append("glib idle") }
            loop.add(
                LoopTimer(fireAt: .now + .milliseconds(20)) { _ in events.append("loop timer 20") }, forMode: .default)
            glibTimeout(context, 50) { events.append("glib timeout 50") }
            loop.add(
                LoopTimer(fireAt: .now + .milliseconds(80)) { _ in events.append("loop timer 80") }, forMode: .default)
            #expect(iterate(context) { events.all.count == 5 })
            #expect(!hosting.remove())
        }
        // The loop's source has GLib's default priority, above idle sources: its block goes first.
        #expect(events.all == ["loop block", "glib idle", "loop timer 20", "glib timeout 50", "loop timer 80"])
    }

    @Test("Work from another thread wakes the context: the loop's descriptor is one of its polls")
    func crossThreadWork() {
        let events = Events()
        onGLibThread { context in
            let loop = Loop.current
            let hosting = try! GLibHostedLoop(hosting: loop, in: context)
            let producer = TestThread { loop.perform(inModes: [.default]) { events.append("from elsewhere") } }
            #expect(iterate(context) { !events.all.isEmpty })
            producer.join()
            hosting.remove()
        }
        #expect(events.all == ["from elsewhere"])
    }

    @Test("An idle hosted loop: the context sleeps, the loop never wakes")
    func idle() {
        onGLibThread { context in
            let loop = Loop.current
            let wakes = Atomic<Int>(0)
            loop.add(
                LoopObserver(activities: .afterWaiting) { _, _ in wakes.wrappingAdd(1, ordering: .relaxed) },
                forMode: .default)
            let hosting = try! GLibHostedLoop(hosting: loop, in: context)
            let ended = Atomic<Bool>(false)
            glibTimeout(context, 300) { ended.store(true, ordering: .relaxed) }
            var iterations = 0
            #expect(
                iterate(context) {
                    iterations += 1
                    return ended.load(ordering: .relaxed)
                })
            #expect(wakes.load(ordering: .relaxed) == 0)
            #expect(iterations <= 4)  // the loop's first dispatches and GLib's timeout; no polling
            hosting.remove()
        }
    }

    @Test("Removing the source ends the hosting; the source and its owner are freed")
    func removal() {
        onGLibThread { context in
            let loop = Loop.current
            weak var released: GLibHostedLoop?
            do {
                let hosting = try! GLibHostedLoop(hosting: loop, in: context)
                released = hosting
                g_main_context_iteration(context, 0)
                #expect(hosting.isAttached)
                hosting.remove()
                #expect(!hosting.isAttached)
                hosting.remove()  // idempotent
            }
            #expect(released == nil, "the GSource was finalized and gave back its reference")
            // The loop is free again: it runs itself.
            #expect(loop.run(.default, for: .zero) != .stopped)
            // And a new hosting is accepted.
            let again = try! GLibHostedLoop(hosting: loop, in: context)
            again.remove()
        }
    }

    @Test("Stopping the hosting's driver removes the source from the context")
    func driverStop() {
        onGLibThread { context in
            let loop = Loop.current
            weak var released: GLibHostedLoop?
            do {
                let hosting = try! GLibHostedLoop(hosting: loop, in: context)
                released = hosting
                loop.perform(inModes: [.default]) { hosting.hosted.driver.stop() }
                #expect(iterate(context) { !hosting.isAttached })
            }
            #expect(released == nil)
        }
    }

    @Test("A nested g_main_loop_run in a GLib callback (a modal dialog's) keeps running the loop's work")
    func nestedGLibRunInAGLibCallback() {
        let events = Events()
        onGLibThread { context in
            let loop = Loop.current
            let hosting = try! GLibHostedLoop(hosting: loop, in: context)
            glibIdle(context) {
                let nested = SharedPointer(g_main_loop_new(context, 0)!)
                loop.perform(inModes: [.default]) { events.append("loop block in the nested run") }
                loop.add(
                    LoopTimer(fireAt: .now + .milliseconds(20)) { _ in
                        events.append("loop timer in the nested run")
                        g_main_loop_quit(nested.pointer)
                    }, forMode: .default)
                g_main_loop_run(nested.pointer)
                g_main_loop_unref(nested.pointer)
                events.append("nested run over")
            }
            #expect(iterate(context) { events.all.last == "nested run over" })
            #expect(!hosting.remove())
        }
        #expect(events.all == ["loop block in the nested run", "loop timer in the nested run", "nested run over"])
    }

    @Test("A loop callout that iterates the context runs GLib's sources; the loop's own work waits for it")
    func nestedIterationInALoopCallout() {
        let events = Events()
        onGLibThread { context in
            let loop = Loop.current
            let hosting = try! GLibHostedLoop(hosting: loop, in: context)
            let shared = SharedPointer(context)
            loop.perform(inModes: [.default]) {
                let context = shared.pointer
                glibIdle(context) { events.append("glib idle") }
                loop.perform(inModes: [.default]) { events.append("loop block queued by the callout") }
                // The hosting source keeps itself out of iterations nested in its own dispatch
                // (never ready, its descriptor out of the polls): this one runs the idle only.
                for _ in 0..<10 where events.all.isEmpty { g_main_context_iteration(context, 0) }
                events.append("callout over")
            }
            #expect(iterate(context) { events.all.count == 3 })
            #expect(!hosting.remove())
        }
        #expect(events.all == ["glib idle", "callout over", "loop block queued by the callout"])
    }

    @Test("Hosting and removal in many rounds leak no descriptor")
    func noLeaks() async {
        await #expect(processExitsWith: .success) {
            func count() -> Int {
                guard let directory = opendir("/proc/self/fd") else { return -1 }
                defer { closedir(directory) }
                var entries = 0
                while readdir(directory) != nil { entries += 1 }
                return entries
            }
            onGLibThread { _ in }  // GLib's own one-time descriptors
            let before = count()
            for _ in 0..<30 {
                onGLibThread { context in
                    let loop = Loop.current
                    let hosting = try! GLibHostedLoop(hosting: loop, in: context)
                    let done = Atomic<Bool>(false)
                    loop.perform(inModes: [.default]) { done.store(true, ordering: .relaxed) }
                    precondition(iterate(context) { done.load(ordering: .relaxed) })
                    hosting.remove()
                }
            }
            precondition(count() == before, "descriptors leaked: \(before) → \(count())")
        }
    }
}

@Suite("A GLib context hosted in a loop", .timeLimit(.minutes(2)))
struct LoopHostedGLibContextTests {
    @Test("GLib idle and timeout callbacks run in the loop's passes, with its own timers")
    func ordering() {
        let events = Events()
        onGLibThread { context in
            let loop = Loop.current
            let glib = try! LoopHostedGLibContext(context, loop: loop, inModes: [.default])
            glibIdle(context) { events.append("glib idle") }
            glibTimeout(context, 40) {
                events.append("glib timeout 40")
                loop.stop()
            }
            loop.add(
                LoopTimer(fireAt: .now + .milliseconds(15)) { _ in events.append("loop timer 15") }, forMode: .default)
            #expect(loop.run(.default, for: .seconds(10)) == .stopped)
            glib.remove()
        }
        #expect(events.all == ["glib idle", "loop timer 15", "glib timeout 40"])
    }

    @Test("A GLib callback that runs the loop nested (R18) gets GLib's sources in the nested run")
    func nestedLoopRunInAGLibCallback() {
        let events = Events()
        onGLibThread { context in
            let loop = Loop.current
            let glib = try! LoopHostedGLibContext(context, loop: loop, inModes: [.default])
            glibTimeout(context, 10) {
                loop.add(
                    LoopTimer(fireAt: .now + .milliseconds(10)) { _ in events.append("loop timer in the nested run") },
                    forMode: .default)
                glibTimeout(context, 40) {
                    events.append("glib timeout in the nested run")
                    loop.stop()
                }
                #expect(loop.run(.default, for: .seconds(10)) == .stopped)
                events.append("nested run over")
                loop.stop()
            }
            #expect(loop.run(.default, for: .seconds(10)) == .stopped)
            glib.remove()
        }
        #expect(events.all == ["loop timer in the nested run", "glib timeout in the nested run", "nested run over"])
    }

    @Test("GLib descriptor watches are loop descriptor sources: a pipe's GIOChannel watch runs")
    func descriptorWatch() {
        let events = Events()
        onGLibThread { context in
            let loop = Loop.current
            var pair: [Int32] = [0, 0]
            precondition(pipe(&pair) == 0)
            let ends = pair
            let glib = try! LoopHostedGLibContext(context, loop: loop, inModes: [.default])
            let channel = g_io_channel_unix_new(ends[0])!
            let watch = g_io_create_watch(channel, G_IO_IN)!
            final class Box {
                let body: () -> Void
                init(_ body: @escaping () -> Void) { self.body = body }
            }
            // The watch holds the retain until GLib frees it and calls the destroy notify.
            let box = Unmanaged.passRetained(
                Box {
                    var byte: UInt8 = 0
                    _ = read(ends[0], &byte, 1)
                    events.append("read \(byte)")
                    loop.stop()
                }
            ).toOpaque()
            let function: @convention(c) (UnsafeMutablePointer<GIOChannel>?, GIOCondition, gpointer?) -> gboolean = {
                _, _, raw in
                Unmanaged<Box>.fromOpaque(raw!).takeUnretainedValue().body()
                return 0
            }
            g_source_set_callback(
                watch, unsafeBitCast(function, to: GSourceFunc.self), box,
                { raw in Unmanaged<Box>.fromOpaque(raw!).release() })
            g_source_attach(watch, context)
            g_source_unref(watch)
            loop.add(
                LoopTimer(fireAt: .now + .milliseconds(20)) { _ in
                    var byte: UInt8 = 7
                    _ = write(ends[1], &byte, 1)
                }, forMode: .default)
            #expect(loop.run(.default, for: .seconds(10)) == .stopped)
            glib.remove()
            g_io_channel_unref(channel)
            close(ends[0])
            close(ends[1])
        }
        #expect(events.all == ["read 7"])
    }

    @Test("GLib callbacks pause while the loop runs a mode that is not the context's")
    func pausesInOtherModes() {
        let events = Events()
        onGLibThread { context in
            let loop = Loop.current
            let tracking: Loop.Mode = "tracking"
            let glib = try! LoopHostedGLibContext(context, loop: loop, inModes: [.default])
            glibTimeout(context, 10) { events.append("glib timeout") }
            loop.add(LoopSource {}, forMode: tracking)
            loop.run(tracking, for: .milliseconds(60))  // the timeout is due, but not in this mode
            events.append("tracking over")
            loop.add(LoopTimer(fireAt: .now + .milliseconds(50)) { _ in loop.stop() }, forMode: .default)
            loop.run(.default, for: .seconds(10))
            glib.remove()
        }
        #expect(events.all == ["tracking over", "glib timeout"])
    }

    @Test("remove() gives the context back: another thread can own it")
    func removal() {
        onGLibThread { _ in
            let loop = Loop.current
            let context = g_main_context_new()!  // not this thread's default, which it owns
            let glib = try! LoopHostedGLibContext(context, loop: loop)
            let shared = SharedPointer(context)
            func ownedElsewhere() -> Bool {
                let acquired = Atomic<Bool>(false)
                TestThread {
                    if g_main_context_acquire(shared.pointer) != 0 {
                        g_main_context_release(shared.pointer)
                        acquired.store(true, ordering: .relaxed)
                    }
                }.join()
                return acquired.load(ordering: .relaxed)
            }
            #expect(!ownedElsewhere())  // the loop's thread owns it
            #expect(throws: LoopHostedGLibContext.HostingError.contextOwnedElsewhere) {
                let made = try TestThread.result { try LoopHostedGLibContext(shared.pointer, loop: .current) }.get()
                made.remove()
            }
            glib.remove()
            #expect(ownedElsewhere())
            #expect(loop.timerCount(forMode: .default) == 0)
            g_main_context_unref(context)
        }
    }
}

/// A GLib pointer handed to another thread of a test, or to a loop callout, which uses it as GLib
/// allows (a context is safe to acquire from any thread; a loop is quit from any thread).
struct SharedPointer: @unchecked Sendable {
    let pointer: OpaquePointer
    init(_ pointer: OpaquePointer) { self.pointer = pointer }
}

/// A plain thread for the tests' other sides.
final class TestThread: @unchecked Sendable {
    // `thread` is written before the thread starts and read by `join()` on the creating thread.
    private var thread = pthread_t()

    init(_ body: @escaping @Sendable () -> Void) {
        final class Box: @unchecked Sendable {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        // The retain travels with the thread's argument; the thread takes it back, once.
        let box = Unmanaged.passRetained(Box(body)).toOpaque()
        let created = pthread_create(
            &thread, nil,
            { raw in
                Unmanaged<Box>.fromOpaque(raw!).takeRetainedValue().body()
                return nil
            }, box)
        precondition(created == 0, "pthread_create: \(created)")
    }

    func join() { pthread_join(thread, nil) }

    /// Runs `body` on a new thread and returns what it returned or threw.
    static func result<T: Sendable>(_ body: @escaping @Sendable () throws -> T) -> Result<T, any Error> {
        let result = Mutex<Result<T, any Error>?>(nil)
        TestThread { result.withLock { $0 = Result { try body() } } }.join()
        return result.withLock { $0! }
    }
}
