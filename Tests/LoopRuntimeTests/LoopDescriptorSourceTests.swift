import CLoopRuntimeShims
import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// SPEC G (R53, M3): descriptor sources, on real pipes and sockets.
@Suite("LoopDescriptorSource (SPEC R53, M3)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopDescriptorSourceTests {
    @Test("R53 a readable descriptor is performed with .readable; the source keeps its mode alive")
    func readable() throws {
        let loop = try makeEpollLoop()
        let pipe = Pipe()
        defer { pipe.close() }
        let trace = Trace()
        let source = LoopDescriptorSource(descriptor: pipe.reader, events: .readable) { _, events in
            trace.append("\(events):\(pipe.drain())")
        }
        try loop.add(source, forMode: .default)
        // Nothing to read: the source keeps the mode alive, the run times out (SPEC R10).
        #expect(loop.run(.default, for: .milliseconds(20)) == .timedOut)
        pipe.write()
        pipe.write()
        #expect(loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true) == .handledSource)
        #expect(trace.text == "readable:2")
        source.invalidate()
        #expect(loop.run(.default, for: .zero) == .finished)
    }

    @Test("R53 a writable descriptor is performed with .writable; a hung-up pipe reports it")
    func writableAndHangUp() throws {
        let loop = try makeEpollLoop()
        let pipe = Pipe()
        let trace = Trace()
        let writer = LoopDescriptorSource(descriptor: pipe.writer, events: .writable) { source, events in
            trace.append("writer:\(events)")
            source.invalidate()
        }
        try loop.add(writer, forMode: .default)
        loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true)
        #expect(trace.text == "writer:writable")

        _ = Glibc.close(pipe.writer)
        trace.clear()
        let reader = LoopDescriptorSource(descriptor: pipe.reader, events: .readable) { source, events in
            trace.append("reader:\(events)")
            source.invalidate()
        }
        try loop.add(reader, forMode: .default)
        loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true)
        #expect(trace.text == "reader:readable|hangUp")
        _ = Glibc.close(pipe.reader)
    }

    @Test("M3 every descriptor source ready after one wait is performed in that pass, by order")
    func allReadyInOnePass() throws {
        let loop = try makeEpollLoop()
        let pipes = [Pipe(), Pipe(), Pipe()]
        defer { pipes.forEach { $0.close() } }
        let trace = Trace()
        loop.add(tracing(trace, [.afterWaiting]), forMode: .default)
        for (index, pipe) in pipes.enumerated() {
            let source = LoopDescriptorSource(descriptor: pipe.reader, events: .readable, order: -index) { _, _ in
                pipe.drain()
                trace.append("p\(index)")
            }
            try loop.add(source, forMode: .default)
        }
        pipes.forEach { $0.write() }
        loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true)
        #expect(trace.text == "AW p2 p1 p0")
    }

    @Test("R53 readiness outside the source's modes: not performed, no spinning, performed later")
    func readinessInAnotherMode() throws {
        let loop = try makeEpollLoop()
        let pipe = Pipe()
        defer { pipe.close() }
        let trace = Trace()
        loop.add(tracing(trace), forMode: .common)
        loop.addCommonMode("other")
        loop.add(keepAliveSource(), forMode: "other")
        let source = LoopDescriptorSource(descriptor: pipe.reader, events: .readable) { _, _ in
            trace.append("performed:\(pipe.drain())")
        }
        try loop.add(source, forMode: .default)
        pipe.write()
        // The pipe is ready the whole time, but the loop runs "other": one wait until the deadline,
        // no empty passes, no perform.
        #expect(loop.run("other", for: .milliseconds(50)) == .timedOut)
        #expect(trace.text == "E BT BS BW AW X")
        trace.clear()
        #expect(loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true) == .handledSource)
        #expect(trace.text == "E BT BS BW AW performed:1 X")
    }

    @Test("R53 a hung-up descriptor of another mode does not make the wait spin")
    func hangUpInAnotherMode() throws {
        let loop = try makeEpollLoop()
        let pipe = Pipe()
        defer { _ = Glibc.close(pipe.reader) }
        let performed = Counter()
        let source = LoopDescriptorSource(descriptor: pipe.reader, events: .readable) { source, _ in
            performed.increment()
            source.invalidate()
        }
        try loop.add(source, forMode: .default)
        loop.add(keepAliveSource(), forMode: "other")
        _ = Glibc.close(pipe.writer)  // EPOLLHUP from now on
        var before = 0.0
        var after = 0.0
        cloop_thread_cpu_microseconds(&before)
        #expect(loop.run("other", for: .milliseconds(200)) == .timedOut)
        cloop_thread_cpu_microseconds(&after)
        #expect(after - before < 100_000, "the wait spun: \(Int(after - before)) µs of CPU in 200 ms")
        #expect(performed.count == 0)
        loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true)
        #expect(performed.count == 1)  // watched again (re-added) in its own mode
    }

    @Test("R53 a descriptor source in several modes and in .common; removal stops the watching")
    func modesAndRemoval() throws {
        let (loop, waiter) = makeManualLoop()
        let performed = Counter()
        let source = LoopDescriptorSource(descriptor: 42, events: .readable) { _, _ in performed.increment() }
        try loop.add(source, forMode: .common)
        loop.addCommonMode("tracking")
        #expect(loop.contains(source, forMode: .default) && loop.contains(source, forMode: "tracking"))
        #expect(waiter.state.withLock { $0.registered[42] != nil })
        waiter.makeReady(42, flags: CLOOP_EPOLLIN)
        loop.run("tracking", for: .zero)
        loop.run(.default, for: .zero)
        #expect(performed.count == 2)  // level-triggered: still ready
        loop.remove(source, forMode: "tracking")
        #expect(loop.contains(source, forMode: .common))
        loop.remove(source, forMode: .common)
        #expect(!loop.contains(source, forMode: .default))
        #expect(waiter.state.withLock { $0.registered[42] == nil })
        #expect(source.isValid)
    }

    @Test("R53 a descriptor source added from another thread wakes a sleeping loop when ready")
    func addFromAnotherThread() throws {
        let loop = try makeEpollLoop()
        let pipe = Pipe()
        defer { pipe.close() }
        loop.add(keepAliveSource(), forMode: .default)
        let performed = Counter()
        let adder = try PlatformThread.spawn {
            _ = eventually { loop.isWaiting }
            let source = LoopDescriptorSource(descriptor: pipe.reader, events: .readable) { source, _ in
                pipe.drain()
                performed.increment()
                source.invalidate()
            }
            try? loop.add(source, forMode: .default)
            pipe.write()
        }
        #expect(loop.run(.default, for: .seconds(30), returnAfterSourceHandled: true) == .handledSource)
        adder.join()
        #expect(performed.count == 1)
    }

    @Test("Bad input: a closed descriptor, one watched twice, a regular file: thrown errors")
    func badDescriptors() throws {
        let loop = try makeEpollLoop()
        let pipe = Pipe()
        defer { pipe.close() }
        let closed = LoopDescriptorSource(descriptor: 9_999, events: .readable) { _, _ in }
        let error = #expect(throws: LoopSystemError.self) { try loop.add(closed, forMode: .default) }
        #expect(error?.call == "epoll_ctl" && error?.errno == EBADF)
        #expect(!loop.contains(closed, forMode: .default))

        let first = LoopDescriptorSource(descriptor: pipe.reader, events: .readable) { _, _ in }
        try loop.add(first, forMode: .default)
        let second = LoopDescriptorSource(descriptor: pipe.reader, events: .readable) { _, _ in }
        let twice = #expect(throws: LoopSystemError.self) { try loop.add(second, forMode: .common) }
        #expect(twice?.errno == EEXIST)
        #expect(twice?.description.contains("already watched by another LoopDescriptorSource") == true)
        #expect(!loop.contains(second, forMode: .common))

        let file = open("/proc/self/status", O_RDONLY | O_CLOEXEC)
        defer { _ = Glibc.close(file) }
        let regular = LoopDescriptorSource(descriptor: file, events: .readable) { _, _ in }
        let rejected = #expect(throws: LoopSystemError.self) { try loop.add(regular, forMode: .default) }
        #expect(rejected?.errno == EPERM)
        first.invalidate()
    }

    @Test("R53 closing a registered descriptor is a programmer error reported with a message")
    func closedWhileRegistered() async {
        await #expect(processExitsWith: .failure) {
            let loop = try makeEpollLoop()
            let pipe = Pipe()
            let source = LoopDescriptorSource(descriptor: pipe.reader, events: .readable) { _, _ in }
            try loop.add(source, forMode: .default)
            pipe.close()  // wrong: the source is still registered
            source.invalidate()
        }
    }

    @Test("R53 a descriptor source belongs to one loop")
    func oneLoop() async {
        await #expect(processExitsWith: .failure) {
            let source = LoopDescriptorSource(descriptor: 42, events: .readable) { _, _ in }
            try Loop(waiter: ManualWaiter()).add(source, forMode: .default)
            try Loop(waiter: ManualWaiter()).add(source, forMode: .default)
        }
    }

    @Test("R5 thread exit stops watching descriptor sources and closes the loop's descriptors")
    func teardown() async {
        await #expect(processExitsWith: .success) {
            let before = descriptorBaseline()
            let pipe = Pipe()
            let source = LoopDescriptorSource(descriptor: pipe.reader, events: .readable) { _, _ in }
            try onNewThread {
                try? Loop.current.add(source, forMode: .default)
            }
            // The loop no longer watches the pipe, so closing it now is fine.
            #expect(source.isValid)
            pipe.close()
            requireNoNewDescriptors(since: before)
        }
    }
}
