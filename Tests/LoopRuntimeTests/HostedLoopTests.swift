import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// A host built on plain `poll(2)`, as HostingALoop.md describes: the hosted loop's descriptor and
/// the host's own descriptors in one poll, the hosted loop's wait as the timeout.
final class PollHost {
    let hosted: HostedLoop
    /// The host's own descriptors and what it does when one is readable.
    var own: [(descriptor: Int32, handler: () -> Void)] = []
    /// Iterations in which poll returned (woke, by readiness or timeout).
    private(set) var wakes = 0
    /// Iterations in which the hosted loop's descriptor was readable.
    private(set) var loopReadable = 0

    init(_ hosted: HostedLoop) { self.hosted = hosted }

    /// One iteration: prepare, poll (at most `cap` ms; -1 for the loop's own limit), dispatch.
    /// False once the hosting has ended.
    @discardableResult
    func iterate(cap: Int32 = -1) -> Bool {
        let wait = hosted.prepare()
        if wait == .ended { return false }
        var timeout = wait.timeoutMilliseconds
        if cap >= 0 && (timeout < 0 || timeout > cap) { timeout = cap }
        var fds = [pollfd(fd: hosted.descriptor, events: Int16(POLLIN), revents: 0)]
        fds += own.map { pollfd(fd: $0.descriptor, events: Int16(POLLIN), revents: 0) }
        let count = poll(&fds, nfds_t(fds.count), timeout)
        precondition(count >= 0 || errno == EINTR, "poll failed: \(errno)")
        wakes += 1
        if fds[0].revents != 0 { loopReadable += 1 }
        for (index, entry) in own.enumerated() where fds[index + 1].revents != 0 { entry.handler() }
        hosted.dispatch()
        return true
    }

    /// Iterates until `done` holds or the hosting ends; false if `timeout` passed first.
    @discardableResult
    func run(timeout: Duration = .seconds(10), until done: () -> Bool = { false }) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while !done() {
            if ContinuousClock.now > deadline { return false }
            if !iterate(cap: 100) { return true }
        }
        return true
    }
}

/// The same program, run by the loop itself or by a host.
private func observedProgram(hosted: Bool) throws -> String {
    let trace = Trace()
    try onNewThread(name: hosted ? "hosted" : "self-run") {
        let loop = Loop.current
        loop.add(tracing(trace), forMode: .default)
        let source = LoopSource { trace.append("source") }
        loop.add(source, forMode: .default)
        let fires = Counter()
        let timer = LoopTimer(fireAt: .now + .milliseconds(20), interval: .milliseconds(20)) { _ in
            trace.append("timer")
            let fired = fires.increment()
            if fired == 1 { source.signal() }
            if fired == 2 { loop.perform(inModes: [.default]) { trace.append("block") } }
            if fired == 3 { loop.driver?.stop() }
        }
        loop.add(timer, forMode: .default)
        if hosted {
            let hostedLoop = try! loop.beginHosting()
            let host = PollHost(hostedLoop)
            #expect(host.run())  // until the driver's stop ends the hosting
            #expect(hostedLoop.isEnded)
            hostedLoop.end()
        } else {
            LoopDriver(loop: loop).run()
        }
        timer.invalidate()
    }
    return trace.text
}

@Suite("Hosted loops: a host runs the loop (issue #32)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct HostedLoopTests {
    @Test("R17 R19 a hosted loop's observers see what a self-run loop's observers see")
    func sameActivities() throws {
        let own = try observedProgram(hosted: false)
        let hosted = try observedProgram(hosted: true)
        #expect(own == "E BT BS BW AW timer BT BS source BT BS BW AW timer block BT BS BW AW timer X")
        #expect(hosted == own)
    }

    @Test("An idle hosted loop keeps the host asleep: no timeout, no wake-up")
    func idleCostsNothing() throws {
        try onNewThread {
            let loop = Loop.current
            let hosted = try! loop.beginHosting()
            let host = PollHost(hosted)
            host.iterate()  // the run call begins: entry, first pass up to its wait
            #expect(hosted.prepare() == .untilReadable(deadline: nil))
            #expect(hosted.prepare().timeoutMilliseconds == -1)
            let before = host.wakes
            for _ in 0..<3 { host.iterate(cap: 100) }  // three polls that time out, 300 ms
            #expect(host.wakes - before == 3)
            #expect(host.loopReadable == 0)
            hosted.end()
        }
    }

    @Test("Work handed over from another thread wakes the host; a due timer does too")
    func wakesForWorkAndTimers() throws {
        try onNewThread {
            let loop = Loop.current
            let hosted = try! loop.beginHosting()
            let host = PollHost(hosted)
            host.iterate()
            let ran = Atomic<Int>(0)
            let helper = try! PlatformThread.spawn(name: "producer") {
                usleep(20_000)
                loop.perform(inModes: [.default]) { ran.store(1, ordering: .relaxed) }
            }
            // Poll on the descriptor alone, without a time limit: only the loop can end the poll.
            while ran.load(ordering: .relaxed) == 0 { host.iterate() }
            helper.join()
            #expect(host.loopReadable >= 1)

            let fired = Atomic<Int>(0)
            let start = ContinuousClock.now
            // Added while the loop waits in the host: the wait's deadline moves (SPEC R41).
            loop.add(
                LoopTimer(fireAt: .now + .milliseconds(30)) { _ in fired.store(1, ordering: .relaxed) },
                forMode: .default)
            if case .untilReadable(let deadline?) = hosted.prepare() {
                #expect(deadline > start)
            } else {
                Issue.record("a hosted loop with a timer waits with its deadline, not \(hosted.prepare())")
            }
            while fired.load(ordering: .relaxed) == 0 {
                let wait = hosted.prepare()
                var fds = [pollfd(fd: hosted.descriptor, events: Int16(POLLIN), revents: 0)]
                _ = poll(&fds, 1, -1)  // the timer's deadline makes the descriptor readable
                if case .untilReadable = wait { #expect(fds[0].revents & Int16(POLLIN) != 0) }
                hosted.dispatch()
            }
            #expect(ContinuousClock.now - start >= .milliseconds(30))
            hosted.end()
        }
    }

    @Test("M4 a dispatch with nothing to do runs no pass")
    func spuriousDispatch() throws {
        try onNewThread {
            let loop = Loop.current
            let trace = Trace()
            loop.add(tracing(trace), forMode: .default)
            let hosted = try! loop.beginHosting()
            hosted.dispatch()
            #expect(trace.text == "E BT BS BW")
            for _ in 0..<5 { hosted.dispatch() }
            #expect(trace.text == "E BT BS BW")
            loop.wakeUp()  // a real wake-up ends the wait: one pass
            hosted.dispatch()
            #expect(trace.text == "E BT BS BW AW BT BS BW")
            hosted.end()
            #expect(trace.text == "E BT BS BW AW BT BS BW AW X")
        }
    }

    @Test("R66 stop() ends the hosted run call; the host enters the loop again")
    func stopReenters() throws {
        try onNewThread {
            let loop = Loop.current
            let trace = Trace()
            loop.add(tracing(trace, [.entry, .exit]), forMode: .default)
            let hosted = try! loop.beginHosting()
            let host = PollHost(hosted)
            host.iterate()
            loop.perform(inModes: [.default]) {
                trace.append("stop")
                loop.stop()
            }
            host.run { trace.count(of: "E") == 2 }
            #expect(trace.text == "E stop X E")
            #expect(!hosted.isEnded)
            hosted.end()
            #expect(trace.text == "E stop X E X")
        }
    }

    @Test("A mode switch while hosted: the host enters the new mode; items of the old one freeze")
    func switchMode() throws {
        try onNewThread {
            let loop = Loop.current
            let trace = Trace()
            let tracking: Loop.Mode = "tracking"
            let hosted = try! loop.beginHosting()
            let host = PollHost(hosted)
            host.iterate()
            #expect(loop.driver === hosted.driver)
            let entered = Atomic<Int>(0)
            hosted.driver.switchMode(to: tracking) { entered.store(1, ordering: .relaxed) }
            host.run { entered.load(ordering: .relaxed) == 1 }
            #expect(loop.currentMode == tracking)
            loop.perform(inModes: [.default]) { trace.append("default") }
            loop.perform(inModes: [tracking]) { trace.append("tracking") }
            host.run { trace.count(of: "tracking") == 1 }
            for _ in 0..<3 { host.iterate(cap: 10) }
            #expect(trace.text == "tracking")  // the default-mode block waits for its mode
            hosted.driver.switchMode(to: .default)
            host.run { trace.count(of: "default") == 1 }
            #expect(trace.text == "tracking default")
            hosted.end()
        }
    }

    @Test("R18 a callout's nested (modal) run runs the loop itself; the hosting goes on after")
    func nestedRun() throws {
        try onNewThread {
            let loop = Loop.current
            let trace = Trace()
            let modal: Loop.Mode = "modal"
            let hosted = try! loop.beginHosting()
            let host = PollHost(hosted)
            host.iterate()
            loop.perform(inModes: [.default]) {
                trace.append("modal-begins")
                loop.add(
                    LoopTimer(fireAt: .now + .milliseconds(20)) { _ in trace.append("modal-timer") }, forMode: modal)
                let result = loop.run(modal, for: .seconds(5))
                trace.append("modal-\(result)")
            }
            host.run { trace.count(of: "modal-finished") == 1 }
            loop.perform(inModes: [.default]) { trace.append("after") }
            host.run { trace.count(of: "after") == 1 }
            #expect(trace.text == "modal-begins modal-timer modal-finished after")
            hosted.end()
        }
    }

    @Test("end() leaves queued work queued, says so, and the next run performs it")
    func endWithWorkQueued() throws {
        try onNewThread {
            let loop = Loop.current
            let trace = Trace()
            let hosted = try! loop.beginHosting()
            let host = PollHost(hosted)
            host.iterate()
            #expect(!hosted.end(), "nothing was queued")
            let second = try! loop.beginHosting()
            PollHost(second).iterate()
            let source = LoopSource { trace.append("queued") }
            loop.add(source, forMode: .default)
            source.signal()  // performed in step 4 of a pass, which the ending pass is past
            #expect(second.end())  // the source waits for the loop's next run
            #expect(trace.text == "")
            #expect(loop.run(.default, for: .zero) == .timedOut)
            #expect(trace.text == "queued")
        }
    }

    @Test("end() from a callout ends the hosting once the dispatch returns")
    func endFromCallout() throws {
        try onNewThread {
            let loop = Loop.current
            let trace = Trace()
            loop.add(tracing(trace, [.entry, .exit]), forMode: .default)
            let hosted = try! loop.beginHosting()
            let host = PollHost(hosted)
            host.iterate()
            loop.perform(inModes: [.default]) {
                hosted.end()
                trace.append("ended-in-callout")
                #expect(!hosted.isEnded)
            }
            host.run()  // until the hosting ends
            #expect(hosted.isEnded)
            #expect(hosted.prepare() == .ended)
            #expect(trace.text == "E ended-in-callout X")
        }
    }

    @Test("Hosting is refused with a reason: twice, while running, a LoopThread's loop, a virtual loop")
    func refusals() throws {
        try onNewThread {
            let loop = Loop.current
            let hosted = try! loop.beginHosting()
            #expect(throws: LoopHostingError.alreadyHosted) { try loop.beginHosting() }
            hosted.end()
            loop.perform(inModes: [.default]) {
                #expect(throws: LoopHostingError.running) { try loop.beginHosting() }
            }
            loop.run(.default, for: .zero)
        }
        let thread = try LoopThread(name: "self-running")
        defer { thread.shutdown() }
        let answered = Atomic<Int>(0)
        thread.loop.perform(inModes: [.common]) {
            #expect(throws: LoopHostingError.driven) { try thread.loop.beginHosting() }
            answered.store(1, ordering: .releasing)
        }
        #expect(eventually { answered.load(ordering: .acquiring) == 1 })
        let (manual, _) = makeManualLoop()
        #expect(throws: LoopHostingError.noDescriptor) { try manual.beginHosting() }
    }

    @Test("Hosting and ending leaks no descriptor and no thread, over many rounds")
    func noLeaks() async {
        // A child process, so that no other test opens descriptors or threads meanwhile.
        await #expect(processExitsWith: .success) {
            let before = descriptorBaseline()
            let threadsBefore = threadNames().count
            for round in 0..<50 {
                try onNewThread(name: "hosting-\(round % 10)") {
                    let loop = Loop.current
                    let pipe = Pipe()
                    let read = Atomic<Int>(0)
                    let source = LoopDescriptorSource(descriptor: pipe.reader, events: .readable) { _, _ in
                        pipe.drain()
                        read.wrappingAdd(1, ordering: .relaxed)
                    }
                    try! loop.add(source, forMode: .default)
                    let hosted = try! loop.beginHosting()
                    let host = PollHost(hosted)
                    pipe.write()
                    precondition(host.run { read.load(ordering: .relaxed) == 1 }, "the pipe was never read")
                    hosted.end()
                    source.invalidate()
                    pipe.close()
                }
            }
            requireNoNewDescriptors(since: before)
            precondition(eventually { threadNames().count == threadsBefore }, "threads leaked")
        }
    }

    @Test("Calling the hosted loop wrongly traps with a message")
    func programmerErrors() async {
        // Off the loop's thread.
        await #expect(processExitsWith: .failure) {
            let loop = try makeEpollLoop()
            let thread = try PlatformThread.spawn(name: "intruder") { _ = try? loop.beginHosting() }
            thread.join()
        }
        // The host runs the loop itself while hosting it.
        await #expect(processExitsWith: .failure) {
            try onNewThread {
                let loop = Loop.current
                let hosted = try! loop.beginHosting()
                hosted.dispatch()
                loop.run(.default, for: .zero)
            }
        }
        // A callout re-enters the host's dispatch.
        await #expect(processExitsWith: .failure) {
            try onNewThread {
                let loop = Loop.current
                let hosted = try! loop.beginHosting()
                loop.perform(inModes: [.default]) { hosted.dispatch() }
                hosted.dispatch()
            }
        }
    }
}
