import Dispatch
import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// SPEC K (R75, R76) and the resident thread.
@Suite("LoopThread (SPEC R75, R76)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopThreadTests {
    @Test("A long thread name keeps a group's index within the kernel's 15 bytes (issue #36)")
    func kernelNamesKeepTheIndex() throws {
        #expect(PlatformThread.kernelName("default-executor-12") == "default-exec-12")
        #expect(PlatformThread.kernelName("default-executor-0") == "default-execu-0")
        #expect(PlatformThread.kernelName("short-3") == "short-3")
        #expect(PlatformThread.kernelName("a-name-longer-than-fifteen") == "a-name-longer-t")
        #expect(PlatformThread.kernelName("ünïcödé-thread-name-7").utf8.count <= 15)
        #expect(PlatformThread.kernelName("ünïcödé-thread-name-7").hasSuffix("-7"))
        let group = try LoopThreadGroup(count: 3, name: "a-long-group-name")
        defer { for thread in group.threads { thread.shutdown() } }
        for thread in group.threads { try thread.perform(waitUntilDone: true) {} }  // each has named itself
        let names = Set(threadNames())
        #expect(names.isSuperset(of: ["a-long-group-0", "a-long-group-1", "a-long-group-2"]), "\(names.sorted())")
    }

    @Test("R76 blocks run on the thread, in issue order, and wake it")
    func issueOrder() throws {
        let thread = try LoopThread(name: "order")
        defer { thread.shutdown() }
        let trace = Trace()
        for index in 0..<100 {
            try thread.perform {
                trace.append(thread.loop.isCurrentThread ? "\(index)" : "wrong-thread")
            }
        }
        try thread.perform(waitUntilDone: true) {}
        #expect(trace.all == (0..<100).map(String.init))
    }

    @Test("R76 waitUntilDone blocks the caller until the block ran")
    func waitUntilDone() throws {
        let thread = try LoopThread(name: "wait")
        defer { thread.shutdown() }
        let ran = Atomic<Bool>(false)
        try thread.perform(waitUntilDone: true) {
            usleep(20_000)
            ran.store(true, ordering: .releasing)
        }
        let hasRun = ran.load(ordering: .acquiring)
        #expect(hasRun)
    }

    @Test("R76 on the thread itself, waitUntilDone runs the block immediately; without it, queues")
    func inlineOnOwnThread() throws {
        let thread = try LoopThread(name: "inline")
        defer { thread.shutdown() }
        let trace = Trace()
        try thread.perform(waitUntilDone: true) {
            try? thread.perform { trace.append("queued") }
            try? thread.perform(waitUntilDone: true) { trace.append("inline") }
            trace.append("after")
        }
        try thread.perform(waitUntilDone: true) {}
        #expect(trace.text == "inline after queued")
    }

    @Test("R76 performing does not remove the loop's other sources")
    func keepsOtherSources() throws {
        let thread = try LoopThread(name: "sources")
        defer { thread.shutdown() }
        let performed = Counter()
        let source = LoopSource { performed.increment() }
        thread.loop.add(source, forMode: .default)
        try thread.perform(waitUntilDone: true) {}
        #expect(thread.loop.contains(source, forMode: .default))
        source.signal()
        #expect(eventually { performed.count == 1 })
    }

    @Test("R76 blocks wait for their modes")
    func modes() throws {
        let thread = try LoopThread(name: "modes")
        defer { thread.shutdown() }
        let trace = Trace()
        try thread.perform(inModes: ["tracking"]) { trace.append("tracking-block") }
        try thread.perform(waitUntilDone: true) {
            trace.append("default-block")
            thread.loop.add(keepAliveSource(), forMode: "tracking")
            thread.loop.run("tracking", for: .zero)
        }
        #expect(trace.text == "default-block tracking-block")
    }

    @Test("R75 perform(after:) runs once after the delay; cancelling prevents it")
    func performAfter() throws {
        let thread = try LoopThread(name: "after")
        defer { thread.shutdown() }
        let trace = Trace()
        let start = ContinuousClock.now
        let ranAt = Locked<ContinuousClock.Instant?>(nil)
        try thread.perform(after: .milliseconds(30)) {
            ranAt.withLock { $0 = .now }
            trace.append("delayed")
        }
        let cancelled = try thread.perform(after: .milliseconds(10)) { trace.append("cancelled") }
        cancelled.invalidate()
        #expect(eventually { trace.all.contains("delayed") })
        usleep(30_000)
        #expect(trace.text == "delayed")
        let at = try #require(ranAt.withLock { $0 })
        #expect(at - start >= .milliseconds(30))
    }

    @Test("R75 a delay of zero still waits for the loop to run one of the modes")
    func zeroDelayWaitsForMode() throws {
        let (loop, _) = makeManualLoop()
        let ran = Counter()
        loop.add(keepAliveSource(), forMode: "other")
        loop.perform(after: .zero) { ran.increment() }
        loop.run("other", for: .zero)
        #expect(ran.count == 0)
        loop.run(.default, for: .zero)
        #expect(ran.count == 1)
    }

    @Test("Shutdown runs every block accepted before it, cancels delayed performs, then refuses work")
    func orderlyShutdown() throws {
        let thread = try LoopThread(name: "shutdown")
        let ran = Counter()
        let gate = DispatchSemaphore(value: 0)
        try thread.perform { gate.wait() }  // hold the thread so that work piles up
        for _ in 0..<50 { try thread.perform { ran.increment() } }
        try thread.perform(inModes: ["never-run-mode"]) {
            ran.increment()
            // Queued during the drain itself: the drain must keep running passes until it is empty.
            thread.loop.perform(inModes: [.default]) { ran.increment() }
        }
        let delayed = try thread.perform(after: .seconds(3600)) { ran.increment() }
        let waiter = try PlatformThread.spawn {
            try? thread.perform(waitUntilDone: true) { ran.increment() }
        }
        usleep(20_000)
        gate.signal()
        thread.shutdown()
        waiter.join()
        #expect(ran.count == 53)
        #expect(!delayed.isValid)
        #expect(!thread.isOpen)
        #expect(throws: LoopThreadError.shutDown(thread: "shutdown")) { try thread.perform {} }
        #expect(throws: LoopThreadError.shutDown(thread: "shutdown")) { try thread.perform(after: .zero) {} }
        thread.shutdown()  // idempotent
    }

    @Test("R10 the thread keeps its common modes alive with a source, not a descriptor its passes would poll")
    func keepAliveIsNotADescriptor() throws {
        let thread = try LoopThread(name: "keep-alive")
        defer { thread.shutdown() }
        let loop = thread.loop
        loop.addCommonMode("extra")
        let outcome = Locked<(result: Loop.RunResult, descriptors: [Bool])?>(nil)
        try thread.perform(waitUntilDone: true) {
            // A nested run of a common mode the driver never entered: kept alive all the same.
            let result = loop.run("extra", for: .milliseconds(1))
            // No descriptor source in the modes a job runs in, so a polling pass (one after a job)
            // makes no `epoll_wait` (Loop+Wait.swift).
            let descriptors = loop.lock.withLock {
                [Loop.Mode.default, "extra"].map { loop.state.modeState($0).mayHaveDescriptorSources }
            }
            outcome.withLock { $0 = (result, descriptors) }
        }
        let seen = outcome.withLock { $0 }
        #expect(seen?.result == .timedOut)
        #expect(seen?.descriptors == [false, false])
    }

    @Test("Shutdown from a callout on the thread itself completes without deadlock")
    func shutdownFromOwnThread() throws {
        let thread = try LoopThread(name: "self-stop")
        try thread.perform { thread.shutdown() }
        #expect(eventually { !thread.isOpen })
        thread.shutdown()  // joins
    }

    // Threads are checked by name: the cooperative pool may start a thread of its own at any
    // time, so a count of the process's threads is not the claim.
    @Test("No thread and no descriptor is left behind by LoopThreads and groups")
    func noLeaks() async {
        await #expect(processExitsWith: .success) {
            let descriptors = descriptorBaseline()
            let ours = { (name: String) in ["leak-check", "released", "group-"].contains { name.hasPrefix($0) } }
            if threadNames().contains(where: ours) { fatalError("threads named like the test's before it began") }
            for _ in 0..<5 {
                let thread = try LoopThread(name: "leak-check")
                try thread.perform(waitUntilDone: true) {}
                thread.shutdown()
            }
            do {
                let released = try LoopThread(name: "released")
                try released.perform {}
            }  // deinit shuts it down
            let group = try LoopThreadGroup(count: 3, name: "group")
            try group.next().perform(waitUntilDone: true) {}
            group.shutdown()
            // A joined thread can stay listed for a moment: glibc's join returns when the kernel
            // clears the thread's id, a little before the kernel removes the thread. A leaked
            // thread never goes.
            let deadline = ContinuousClock.now + .seconds(10)
            while threadNames().contains(where: ours) && ContinuousClock.now < deadline { usleep(1_000) }
            let left = threadNames().filter(ours)
            if !left.isEmpty { fatalError("threads leaked: \(left)") }
            requireNoNewDescriptors(since: descriptors)
        }
    }

    @Test("LoopThreadGroup hands out its threads round-robin")
    func group() throws {
        let group = try LoopThreadGroup(count: 3, name: "rr")
        defer { group.shutdown() }
        #expect(group.threads.count == 3)
        let picks = (0..<6).map { _ in ObjectIdentifier(group.next()) }
        #expect(picks[0] != picks[1] && picks[1] != picks[2] && picks[0] != picks[2])
        #expect(Array(picks[0..<3]) == Array(picks[3..<6]))
        #expect(group.threads.map(\.name) == ["rr-0", "rr-1", "rr-2"])
    }

    @Test("R76 an empty mode list traps")
    func emptyModes() async {
        await #expect(processExitsWith: .failure) {
            let thread = try LoopThread(name: "empty")
            try thread.perform(inModes: []) {}
        }
    }

    /// Issue #31, case 11: a cancelled delayed perform was let go of, with its block's captures,
    /// under the thread's own lock, by the next `perform(after:)`; a capture whose deinit called
    /// `perform(after:)` deadlocked there.
    @Test("R75 a delayed perform's captures are released outside the thread's lock (a deinit may perform again)")
    func delayedPerformCapturesReleasedOutsideTheLock() async {
        await #expect(processExitsWith: .success) {
            _ = try PlatformThread.spawn(name: "watchdog") {
                sleep(20)
                exit(3)  // deadlocked
            }
            let thread = try LoopThread(name: "reentrant")
            let reperformed = Flag()
            var probe: DeinitProbe? = DeinitProbe {
                _ = try? thread.perform(after: .seconds(3_600)) {}
                reperformed.set(true)
            }
            try thread.perform(after: .seconds(3_600)) { [probe] in _ = probe }.invalidate()
            probe = nil  // the thread still lists the cancelled perform until its next delayed one
            _ = try thread.perform(after: .seconds(3_600)) {}
            precondition(eventually { reperformed.value }, "the capture was never released")
            thread.shutdown()
        }
    }
}
