import Dispatch
import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// The end of a loop's life (Loop+Lifecycle.swift): open → draining → ended, every call answered.
@Suite("Lifecycle: the end of a loop's life", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopLifecycleTests {
    @Test("A second concurrent shutdown() returns only after the teardown ran (×300)")
    func concurrentShutdownWaitsForTeardown() throws {
        for _ in 0..<300 {
            let thread = try LoopThread(name: "twice")
            let tornDown = Flag()
            thread.loop.add(LoopSource(cancel: { _, _ in tornDown.set(true) }) {}, forMode: "x")
            let second = try PlatformThread.spawn(name: "second") {
                thread.shutdown()
                precondition(tornDown.value, "shutdown() returned before the teardown")
            }
            thread.shutdown()
            #expect(tornDown.value)
            second.join()
        }
    }

    @Test("perform racing shutdown: every block accepted runs, every refusal is told (×300)")
    func performRacingShutdown() throws {
        for _ in 0..<300 {
            let thread = try LoopThread(name: "racing")
            let loop = thread.loop
            let accepted = AtomicCount()
            let ran = AtomicCount()
            let sender = try PlatformThread.spawn(name: "sender") {
                for _ in 0..<200 {
                    if loop.perform({ ran.increment() }) {
                        accepted.increment()
                    }
                }
            }
            thread.shutdown()
            sender.join()
            #expect(ran.value == accepted.value)
            #expect(loop.hasEnded)
            #expect(!loop.perform {})
        }
    }

    @Test("The drain does not seal while a resumption onto the loop is under way (a seal hold is out)")
    func drainWaitsForSealHolds() throws {
        let thread = try LoopThread(name: "held")
        let loop = thread.loop
        // What LoopExecutor's async bridges do around the resumption of a task pinned to this loop.
        #expect(loop.holdSeal(for: "test"))
        let shutdownReturned = Flag()
        let stopper = try PlatformThread.spawn(name: "stopper") {
            thread.shutdown()
            shutdownReturned.set(true)
        }
        #expect(eventually { !loop.isOpen })  // draining: items refused, work still accepted
        usleep(50_000)
        #expect(!loop.hasEnded, "the loop sealed with a hold out: the resumed task's hop would trap")
        #expect(!shutdownReturned.value)
        let ran = Flag()
        #expect(loop.perform { ran.set(true) })  // the hop's stand-in: work is still run
        #expect(eventually { ran.value })
        loop.releaseSealHold(for: "test")
        stopper.join()
        #expect(shutdownReturned.value)
        #expect(loop.hasEnded)
        #expect(!loop.holdSeal(for: "test"), "an ended loop takes no hold")
    }

    /// Issue #31, case 3: the drain waited for seal holds for ever; a hold never released now
    /// fails the shutdown loudly, naming its holder, after `LoopThread.sealHoldLimit`.
    @Test("A seal hold never released traps the shutdown after the limit, naming the holder")
    func sealHoldNeverReleased() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            LoopThread.sealHoldLimit.store(200_000_000, ordering: .relaxed)  // 200 ms, in this process
            let thread = try LoopThread(name: "forgotten")
            _ = thread.loop.holdSeal(for: "a forgotten hold")
            thread.shutdown()
        }
        let message = String(decoding: exit.standardErrorContent, as: UTF8.self)
        #expect(message.contains("a forgotten hold (1)"))
        #expect(message.contains("never released"))
    }

    /// Issue #31, case 7: a port removed from every mode was not among the items the seal
    /// closed, and its sends kept succeeding after the loop had ended — messages nobody would
    /// ever deliver.
    @Test("R54 a port in no mode is closed by its loop's end too: sends throw, queued messages are returned")
    func portInNoModeEndsWithItsLoop() throws {
        let thread = try LoopThread(name: "port-no-mode")
        let delivered = AtomicCount()
        let port = try LoopPort<Int> { _ in delivered.increment() }
        try thread.loop.add(port, forMode: .default)
        thread.loop.remove(port, forMode: .default)
        try port.send(1)  // accepted: it waits for the port to be in a running mode again
        thread.shutdown()
        #expect(throws: LoopPort<Int>.SendError.loopEnded(loop: thread.loop.description)) { try port.send(2) }
        #expect(!port.isValid)
        #expect(port.invalidate() == [1])  // nothing lost: the owner gets it back
        #expect(delivered.value == 0)
    }

    @Test("Port messages queued when the shutdown begins are delivered; sends after the end throw")
    func portMessagesDrained() throws {
        let thread = try LoopThread(name: "ports")
        let delivered = AtomicCount()
        let port = try LoopPort<Int> { _ in delivered.increment() }
        try thread.loop.add(port, forMode: .default)
        let hold = DispatchSemaphore(value: 0)
        try thread.perform { hold.wait() }  // the loop is busy while the messages are sent
        for value in 0..<100 { try port.send(value) }
        let shutter = try PlatformThread.spawn(name: "shutter") { thread.shutdown() }
        #expect(eventually { !thread.isOpen })
        hold.signal()
        shutter.join()
        #expect(delivered.value == 100)
        #expect(!port.isValid)
        #expect(throws: LoopPort<Int>.SendError.self) { try port.send(1) }
    }

    @Test("Items added to an ended loop are refused and say so: invalid timers, observers, sources, ports")
    func itemsRefusedAfterEnd() throws {
        let thread = try LoopThread(name: "ended")
        let loop = thread.loop
        thread.shutdown()
        let timer = LoopTimer(after: .milliseconds(1)) { _ in }
        loop.add(timer, forMode: .default)
        #expect(!timer.isValid)
        let observer = LoopObserver(activities: .entry) { _, _ in }
        loop.add(observer, forMode: .default)
        #expect(!observer.isValid)
        #expect(!loop.add(LoopSource {}, forMode: .default))
        let port = try LoopPort<Int> { _ in }
        try loop.add(port, forMode: .default)
        #expect(!port.isValid)
        #expect(throws: LoopPort<Int>.SendError.self) { try port.send(1) }
        let pipe = Pipe()
        defer { pipe.close() }
        let descriptor = LoopDescriptorSource(descriptor: pipe.reader, events: .readable) { _, _ in }
        try loop.add(descriptor, forMode: .default)
        #expect(!descriptor.isValid)
        #expect(!loop.perform {})
        #expect(loop.hasEnded && !loop.isOpen)
    }

    @Test("M7 another thread removing the only timer of the mode a loop sleeps in ends the run at once")
    func removingLastTimerEndsRun() throws {
        for removal in ["invalidate", "remove"] {
            let result = Locked<Loop.RunResult?>(nil)
            let timer = LoopTimer(after: .seconds(600)) { _ in }
            let loopBox = Locked<Loop?>(nil)
            let runner = try PlatformThread.spawn(name: "sleeper") {
                let loop = Loop.current
                loop.add(timer, forMode: .default)
                loopBox.withLock { $0 = loop }
                let outcome = loop.run(.default, for: .seconds(600))
                result.withLock { $0 = outcome }
            }
            #expect(eventually { loopBox.withLock { $0 }?.isWaiting == true })
            if removal == "invalidate" {
                timer.invalidate()
            } else {
                loopBox.withLock { $0 }!.remove(timer, forMode: .default)
            }
            #expect(eventually(timeout: .seconds(10)) { result.withLock { $0 } != nil })
            #expect(result.withLock { $0 } == .finished)
            runner.join()
        }
    }

    @Test("R38 a repeating timer whose callout sets a past fire date fires again at once")
    func pastFireDateFromCallout() {
        let (loop, waiter) = makeManualLoop()
        let t0 = waiter.now()
        let fires = Trace()
        let calls = Counter()
        let timer = LoopTimer(fireAt: waiter.virtualNow + .milliseconds(100), interval: .milliseconds(100)) { timer in
            fires.append("\((waiter.now() - t0) / 1_000_000)")
            if calls.increment() == 1 {
                waiter.advance(by: .milliseconds(300))  // the callout ends at t0+400
                timer.setFireDate(waiter.virtualNow - .seconds(10))
            }
            if calls.count == 3 { loop.stop() }
        }
        loop.add(timer, forMode: .default)
        #expect(loop.run(.default) == .stopped)
        // Fired at 100; the past date counts as now (t0+400), later than 100: kept, so it fires at
        // once at 400, then keeps the new phase: 500.
        #expect(fires.text == "100 400 500")
    }

    @Test("R62 addCommonMode(M) while the loop sleeps in M runs the .common blocks queued before")
    func addCommonModeWakesSleepingLoop() throws {
        let thread = try LoopThread(name: "common")
        defer { thread.shutdown() }
        let loop = thread.loop
        thread.driver.switchMode(to: "panel")
        #expect(eventually { loop.currentMode == "panel" && loop.isWaiting })
        let ran = Flag()
        loop.perform { ran.set(true) }  // .common: not yet for "panel"
        usleep(50_000)
        #expect(!ran.value)
        loop.addCommonMode("panel")
        #expect(eventually { ran.value })
    }

    @Test("A .common repeating timer does not grow the heap of a common mode that never runs")
    func neverRunCommonModeHeapStaysBounded() {
        let (loop, waiter) = makeManualLoop()
        loop.addCommonMode("never-run")
        let fired = Counter()
        let timer = LoopTimer(fireAt: waiter.virtualNow, interval: .milliseconds(1)) { _ in
            if fired.increment() == 2_000 { loop.stop() }
        }
        loop.add(timer, forMode: .common)
        loop.add(keepAliveSource(), forMode: .default)
        let observer = LoopObserver(activities: .beforeTimers) { _, _ in waiter.advance(by: .milliseconds(1)) }
        loop.add(observer, forMode: .default)
        #expect(loop.run(.default) == .stopped)
        let heapSize = loop.lock.withLock { loop.state.modes["never-run"]!.timerHeap.entries.count }
        #expect(fired.count == 2_000)
        #expect(heapSize <= 40)
        timer.invalidate()
    }

    @Test("R53 a registered descriptor closed while a dup keeps its file open traps instead of spinning")
    func closedDuplicatedDescriptorTraps() async throws {
        let result = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let pipe = Pipe()
            let duplicate = dup(pipe.reader)
            let loop = try makeEpollLoop()
            let source = LoopDescriptorSource(descriptor: pipe.reader, events: .readable) { _, _ in
                var byte: UInt8 = 0
                _ = read(pipe.reader, &byte, 1)  // EBADF: the data stays, readiness stays
            }
            try loop.add(source, forMode: .default)
            pipe.write()
            _ = Glibc.close(pipe.reader)
            loop.run(.default, for: .seconds(30))
            _ = duplicate
        }
        let message = String(decoding: result.standardErrorContent, as: UTF8.self)
        #expect(message.contains("was closed while it was registered"))
        #expect(message.contains("SPEC R53"))
    }

    @Test("An invalidated source's last release does not run user code under the loop's lock")
    func lastReleaseOutsideLock() throws {
        let done = DispatchSemaphore(value: 0)
        let worker = try PlatformThread.spawn(name: "release") {
            let loop = Loop.current
            loop.add(keepAliveSource(), forMode: .default)
            do {
                let probe = DeinitProbe { _ = loop.perform {} }  // takes the loop's lock in deinit
                let source = LoopSource { _ = probe }
                loop.add(source, forMode: .default)
                source.signal()
                source.invalidate()
            }
            loop.run(.default, for: .zero)  // the pass drops the last reference to the source
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 20) == .success, "the pass deadlocked in a deinit")
        worker.join()
    }

    /// The one callout gate (Loop+Callouts.swift) for the four kinds of item with a handler. An
    /// observer's `invalidate()` did not wait before issue #31 (case 2): it returned while the
    /// handler still ran, so whatever the handler used could be freed under it.
    @Test(
        "After invalidate() returns on another thread, the handler is not running and never runs again (×80 each)",
        arguments: GatedItemKind.allCases)
    func invalidateWaitsForRunningCallout(kind: GatedItemKind) throws {
        for _ in 0..<80 {
            let thread = try LoopThread(name: "gate")
            let inHandler = Flag()
            let calls = AtomicCount()
            let handler: @Sendable () -> Void = {
                inHandler.set(true)
                calls.increment()
                for _ in 0..<200 { sched_yield() }
                inHandler.set(false)
            }
            let item = try kind.make(on: thread.loop, handler)
            while calls.value == 0 {
                item.trigger()
                sched_yield()
            }
            item.trigger()
            item.invalidate()
            let after = calls.value
            #expect(!inHandler.value)
            item.trigger()
            try thread.perform(waitUntilDone: true) {}  // a pass that would call it, were it still there
            thread.shutdown()
            #expect(calls.value == after)
            item.close()
        }
    }
}

/// The kinds of item whose handler a loop calls behind the callout gate.
enum GatedItemKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case source, timer, descriptorSource, observer

    var testDescription: String { rawValue }

    /// An item of this kind in `loop`'s common modes, calling `handler` whenever it is triggered.
    func make(on loop: Loop, _ handler: @escaping @Sendable () -> Void) throws -> GatedItem {
        switch self {
        case .source:
            let source = LoopSource(perform: handler)
            loop.add(source, forMode: .common)
            return GatedItem(trigger: source.signal, invalidate: source.invalidate)
        case .timer:
            let timer = LoopTimer(fireAt: .now, interval: .microseconds(100)) { _ in handler() }
            loop.add(timer, forMode: .common)
            return GatedItem(trigger: {}, invalidate: timer.invalidate)
        case .descriptorSource:
            // A pipe with a byte in it stays readable: every pass performs the source.
            var ends: [Int32] = [0, 0]
            try #require(pipe(&ends) == 0)
            var byte: UInt8 = 1
            try #require(write(ends[1], &byte, 1) == 1)
            let source = LoopDescriptorSource(descriptor: ends[0], events: .readable) { _, _ in handler() }
            try loop.add(source, forMode: .common)
            let (reader, writer) = (ends[0], ends[1])
            return GatedItem(
                trigger: {}, invalidate: source.invalidate,
                close: {
                    close(reader)
                    close(writer)
                })
        case .observer:
            let observer = LoopObserver(activities: [.beforeWaiting, .afterWaiting]) { _, _ in handler() }
            loop.add(observer, forMode: .common)
            return GatedItem(trigger: { _ = loop.perform {} }, invalidate: observer.invalidate)
        }
    }
}

/// An item behind the callout gate, as `GatedItemKind.make` made it.
struct GatedItem {
    /// Makes the loop call the handler soon (a signal, a wake-up; nothing for items it calls anyway).
    let trigger: @Sendable () -> Void
    let invalidate: @Sendable () -> Void
    /// Gives back what the item used (a descriptor source's pipe), after the loop has ended.
    var close: () -> Void = {}
}

/// Runs `body` when released.
final class DeinitProbe: Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    deinit { body() }
}

/// A flag shared between threads (sequentially consistent).
final class Flag: Sendable {
    private let storage = Atomic<Bool>(false)
    func set(_ value: Bool) { storage.store(value, ordering: .sequentiallyConsistent) }
    var value: Bool { storage.load(ordering: .sequentiallyConsistent) }
}

/// A count shared between threads.
final class AtomicCount: Sendable {
    private let storage = Atomic<Int>(0)
    func increment() { storage.wrappingAdd(1, ordering: .relaxed) }
    var value: Int { storage.load(ordering: .relaxed) }
}
