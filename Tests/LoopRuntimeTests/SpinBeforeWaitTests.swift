import Dispatch
import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// The short spin a loop makes before it blocks after a quick hand-off (SpinPolicy.swift, issue
/// #35): it turns on and off as the policy says, costs an idle loop nothing, and never keeps the
/// loop from its descriptors.
@Suite("Spinning before the wait (SPEC M2, M3, R67)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct SpinBeforeWaitTests {
    @Test("The policy spins only after a gap shorter than its limit that a hand-off ended")
    func policy() {
        var policy = SpinPolicy()
        #expect(policy.budget == 0, "a new loop blocks at once")
        policy.waitEnded(from: 1_000, to: 1_000 + SpinPolicy.limit / 2, handOff: true)
        #expect(policy.budget == SpinPolicy.limit)
        // A gap as long as the limit (a spin that caught nothing, and the wait after it).
        policy.waitEnded(from: 1_000, to: 1_000 + SpinPolicy.limit, handOff: true)
        #expect(policy.budget == 0)
        policy.waitEnded(from: 1_000, to: 1_500, handOff: true)
        #expect(policy.budget == SpinPolicy.limit)
        // A short wait that a timer or a descriptor ended says nothing about hand-offs.
        policy.waitEnded(from: 1_000, to: 1_500, handOff: false)
        #expect(policy.budget == 0)
    }

    @Test("Only loops on the real clock spin")
    func onlyRealLoops() throws {
        let (manual, _) = makeManualLoop()
        #expect(!manual.spinsBeforeWaiting)
        let real = try makeEpollLoop()
        #expect(real.spinsBeforeWaiting == SpinPolicy.enabled)
    }

    @Test("After a burst of quick hand-offs an idle loop takes no CPU time and blocks at once")
    func idleAfterABurst() throws {
        let thread = try LoopThread(name: "spin-idle")
        defer { thread.shutdown() }
        // A burst of round trips whose producer answers at once (it spins on an atomic), so the
        // loop's gaps are short and its spinning turns on.
        let acknowledged = Atomic<Int>(0)
        for round in 1...2_000 {
            try thread.perform { acknowledged.store(round, ordering: .releasing) }
            while acknowledged.load(ordering: .acquiring) != round {}
        }
        let before = try usage(of: thread)
        usleep(500_000)
        let after = try usage(of: thread)
        // The loop spins at most 20 µs after the burst, then blocks until the second reading.
        let cpu = after.cpuMicroseconds - before.cpuMicroseconds
        #expect(cpu < 100_000, "the idle loop thread used \(cpu) µs of CPU in 500 ms")
        #expect(after.voluntarySwitches - before.voluntarySwitches <= 4, "the idle loop woke up more than once")
    }

    @Test("M3 a loop kept busy by hand-offs still services a ready descriptor")
    func descriptorsUnderAStreamOfHandOffs() throws {
        let thread = try LoopThread(name: "spin-descriptors")
        defer { thread.shutdown() }
        let sockets = SocketPair()
        defer { sockets.close() }
        let readable = Atomic<Bool>(false)
        let source = LoopDescriptorSource(descriptor: sockets.local, events: .readable) { _, _ in
            _ = readAll(sockets.local)
            readable.store(true, ordering: .releasing)
        }
        try thread.perform(waitUntilDone: true) { try? thread.loop.add(source, forMode: .default) }
        defer { source.invalidate() }
        // A producer that hands the loop a block as soon as the last one ran, for up to 10 s.
        let flooding = Atomic<Bool>(true)
        let ran = Atomic<Int>(0)
        let flood = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            var sent = 0
            let end = ContinuousClock.now + .seconds(10)
            while flooding.load(ordering: .acquiring) && ContinuousClock.now < end {
                sent += 1
                guard (try? thread.perform { ran.add(1, ordering: .relaxed) }) != nil else { break }
                while ran.load(ordering: .relaxed) < sent && flooding.load(ordering: .relaxed) {}
            }
            flood.signal()
        }
        while ran.load(ordering: .relaxed) < 1_000 {}
        sockets.sendFromPeer()
        let deadline = ContinuousClock.now + .seconds(10)
        while !readable.load(ordering: .acquiring) && ContinuousClock.now < deadline { usleep(1_000) }
        let serviced = readable.load(ordering: .acquiring)
        flooding.store(false, ordering: .releasing)
        flood.wait()
        #expect(serviced, "the descriptor was not serviced while hand-offs kept coming")
    }

    /// The CPU time and voluntary context switches of `thread`'s loop thread so far, read on it.
    private func usage(of thread: LoopThread) throws -> (cpuMicroseconds: Int, voluntarySwitches: Int) {
        let reading = Locked<(Int, Int)>((0, 0))
        try thread.perform(waitUntilDone: true) {
            var usage = rusage()
            // RUSAGE_THREAD (1 on Linux; Glibc's module map leaves the GNU constant out).
            precondition(getrusage(__rusage_who_t(1), &usage) == 0, "getrusage failed: \(errno)")
            let cpu =
                (usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) * 1_000_000
                + usage.ru_utime.tv_usec + usage.ru_stime.tv_usec
            reading.withLock { $0 = (cpu, usage.ru_nvcsw) }
        }
        return reading.withLock { $0 }
    }
}
