import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// A connected pair of non-blocking UNIX stream sockets; `close()` closes both.
struct SocketPair {
    let local: Int32
    let peer: Int32

    init() {
        var fds: [Int32] = [0, 0]
        precondition(
            socketpair(
                AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0,
                &fds) == 0, "socketpair failed")
        local = fds[0]
        peer = fds[1]
    }

    /// Writes to `local` until the kernel says `EAGAIN`; returns the number of bytes written.
    @discardableResult
    func fillLocal() -> Int {
        let chunk = [UInt8](repeating: 7, count: 65_536)
        var total = 0
        while true {
            let written = chunk.withUnsafeBytes { Glibc.write(local, $0.baseAddress, $0.count) }
            if written <= 0 {
                precondition(errno == EAGAIN, "write failed: \(errno)")
                return total
            }
            total += written
        }
    }

    /// Reads everything `peer` has; returns the number of bytes.
    @discardableResult
    func drainPeer() -> Int { readAll(peer) }

    func sendFromPeer(_ byte: UInt8 = 1) {
        var value = byte
        precondition(Glibc.write(peer, &value, 1) == 1, "write failed")
    }

    func close() {
        _ = Glibc.close(local)
        _ = Glibc.close(peer)
    }
}

/// Changing what a descriptor source waits for, in place (`setEvents`, SPEC R53).
@Suite("LoopDescriptorSource interest change (SPEC R53)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopDescriptorInterestTests {
    @Test("R53 a writer asks for .writable at EAGAIN and drops it once drained, from its handler")
    func writerBackpressure() throws {
        let loop = try makeEpollLoop()
        let sockets = SocketPair()
        defer { sockets.close() }
        let trace = Trace()
        let source = LoopDescriptorSource(descriptor: sockets.local, events: .readable) { source, events in
            trace.append("\(events)")
            if events.contains(.writable) {
                try? source.setEvents(.readable)  // drained: back to reading only
            }
        }
        try loop.add(source, forMode: .default)
        sockets.fillLocal()
        try source.setEvents([.readable, .writable])
        #expect(source.events == [.readable, .writable])
        // The send buffer is full: nothing to report, the run times out.
        #expect(loop.run(.default, for: .milliseconds(30)) == .timedOut)
        #expect(trace.all.isEmpty)
        sockets.drainPeer()
        #expect(loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true) == .handledSource)
        #expect(trace.text == "writable")
        #expect(source.events == .readable)
        // Always writable now, but no longer asked for: no more callouts, no spinning.
        #expect(loop.run(.default, for: .milliseconds(30)) == .timedOut)
        #expect(trace.text == "writable")
        #expect(loop.contains(source, forMode: .default))
        sockets.sendFromPeer()
        #expect(loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true) == .handledSource)
        #expect(trace.text == "writable readable")
        source.invalidate()
    }

    @Test("R53 setEvents from another thread wakes the loop blocked in its wait")
    func fromAnotherThread() throws {
        let loop = try makeEpollLoop()
        let sockets = SocketPair()
        defer { sockets.close() }
        let seen = Mutex<LoopDescriptorSource.Events>([])
        let source = LoopDescriptorSource(descriptor: sockets.local, events: .readable) { source, events in
            seen.withLock { $0.formUnion(events) }
            source.invalidate()
        }
        try loop.add(source, forMode: .default)
        let changer = try PlatformThread.spawn {
            _ = eventually { loop.isWaiting }
            try? source.setEvents([.readable, .writable])
        }
        // Blocked for .readable only on an idle socket; the change alone ends the wait.
        #expect(loop.run(.default, for: .seconds(30), returnAfterSourceHandled: true) == .handledSource)
        changer.join()
        #expect(seen.withLock { $0 } == .writable)
    }

    @Test("R53 readiness recorded before a change and no longer asked for is not reported")
    func pendingReadinessFiltered() throws {
        let loop = try makeEpollLoop()
        let sockets = SocketPair()
        defer { sockets.close() }
        let trace = Trace()
        loop.addCommonMode("other")
        loop.add(keepAliveSource(), forMode: "other")
        let source = LoopDescriptorSource(descriptor: sockets.local, events: .readable) { source, events in
            trace.append("\(events)")
            source.invalidate()
        }
        try loop.add(source, forMode: .default)
        sockets.fillLocal()
        sockets.sendFromPeer()
        // Readable while the loop runs "other": the source is paused, not performed.
        #expect(loop.run("other", for: .milliseconds(30)) == .timedOut)
        try source.setEvents(.writable)  // while paused: used when it is watched again
        #expect(loop.run(.default, for: .milliseconds(30)) == .timedOut)
        #expect(trace.all.isEmpty)  // readable, but no longer asked for; not writable yet
        sockets.drainPeer()
        #expect(loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true) == .handledSource)
        #expect(trace.text == "writable")
    }

    @Test("M3 R53 a change made by an earlier handler of the same pass is honoured by the later one")
    func changedWithinAPass() throws {
        let loop = try makeEpollLoop()
        let (first, second) = (SocketPair(), SocketPair())
        defer {
            first.close()
            second.close()
        }
        let trace = Trace()
        let later = LoopDescriptorSource(descriptor: second.local, events: .readable, order: 1) { _, events in
            trace.append("later:\(events)")
        }
        let earlier = LoopDescriptorSource(descriptor: first.local, events: .readable, order: 0) { _, events in
            trace.append("earlier:\(events)")
            try? later.setEvents(.writable)  // no longer reading: its readiness must not be reported
        }
        try loop.add(earlier, forMode: .default)
        try loop.add(later, forMode: .default)
        second.fillLocal()  // so that `later` is not writable either
        first.sendFromPeer()
        second.sendFromPeer()
        // Both are readable after one wait (SPEC M3); the earlier handler runs first.
        #expect(loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true) == .handledSource)
        #expect(trace.text == "earlier:readable")
        earlier.invalidate()
        later.invalidate()
    }

    @Test("R53 events set before the source is added are the ones watched")
    func beforeAdding() throws {
        let loop = try makeEpollLoop()
        let sockets = SocketPair()
        defer { sockets.close() }
        let trace = Trace()
        let source = LoopDescriptorSource(descriptor: sockets.local, events: .readable) { source, events in
            trace.append("\(events)")
            source.invalidate()
        }
        try source.setEvents(.writable)
        try loop.add(source, forMode: .default)
        #expect(loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true) == .handledSource)
        #expect(trace.text == "writable")
        // An invalid source only records the change.
        try source.setEvents(.readable)
        #expect(source.events == .readable)
    }

    @Test("R53 the manual waiter's registration follows the change; a paused source resumes with it")
    func registrationUpdatedInPlace() throws {
        let (loop, waiter) = makeManualLoop()
        let source = LoopDescriptorSource(descriptor: 42, events: .readable) { _, _ in }
        try loop.add(source, forMode: .default)
        let token = waiter.state.withLock { $0.registered[42]?.token }
        try source.setEvents([.readable, .writable])
        let registration = waiter.state.withLock { $0.registered[42] }
        #expect(registration?.events == LoopDescriptorSource.Events([.readable, .writable]).epollFlags)
        #expect(registration?.token == token)  // modified, not registered again
        source.invalidate()
    }

    @Test("R53 asking for no reading or writing is a programmer error")
    func noEvents() async {
        await #expect(processExitsWith: .failure) {
            let source = LoopDescriptorSource(descriptor: 42, events: .readable) { _, _ in }
            try source.setEvents(.hangUp)
        }
    }
}
