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

    @Test(
        "A hand-off made soon after the loop blocked turns spinning on, however slow the wake-up through the kernel was"
    )
    func policyMeasuresToTheHandOff() {
        var policy = SpinPolicy()
        let readyAt: Int64 = 1_000_000
        // Handed over 5 µs after the loop blocked; the kernel took 40 µs more to wake it (a virtual
        // machine's wake-up). Measured to the wake-up, spinning would stay off for good.
        policy.waitEnded(from: readyAt, to: readyAt + 45_000, handedOverAt: readyAt + 5_000, handOff: true)
        #expect(policy.budget == SpinPolicy.limit)
        // Handed over late: off.
        policy.waitEnded(
            from: readyAt, to: readyAt + 2 * SpinPolicy.limit, handedOverAt: readyAt + SpinPolicy.limit + 1,
            handOff: true)
        #expect(policy.budget == 0)
        // A stamp from before the wait is an older hand-off's: the gap runs to the end.
        policy.waitEnded(from: readyAt, to: readyAt + 45_000, handedOverAt: readyAt - 1, handOff: true)
        #expect(policy.budget == 0)
        // One after the end is not this wait's either (stored after the loop looked).
        policy.waitEnded(from: readyAt, to: readyAt + 45_000, handedOverAt: readyAt + 50_000, handOff: true)
        #expect(policy.budget == 0)
        // A stamp inside a wait that a timer ended says nothing.
        policy.waitEnded(from: readyAt, to: readyAt + 45_000, handedOverAt: readyAt + 5_000, handOff: false)
        #expect(policy.budget == 0)
    }

    @Test("A producer that wakes a blocked loop stamps the hand-off; one that finds it awake does not")
    func producersStampTheHandOff() throws {
        let thread = try LoopThread(name: "spin-stamp")
        defer { thread.shutdown() }
        let loop = thread.loop
        guard loop.spinsBeforeWaiting else { return }  // LOOP_SPIN_BEFORE_WAIT=0: nothing stamps
        // Idle long enough that the loop is blocked in the kernel, not spinning.
        #expect(eventually { loop.blockedInWait.load(ordering: .acquiring) })
        let before = loop.waiter.now()
        let ran = Atomic<Int64>(0)
        try thread.perform { ran.store(loop.waiter.now(), ordering: .releasing) }
        #expect(eventually { ran.load(ordering: .acquiring) != 0 })
        let stamp = loop.handedOverAt.load(ordering: .relaxed)
        #expect(stamp >= before && stamp <= ran.load(ordering: .acquiring), "the stamp is the hand-off's")
        // A hand-off to a loop that is awake (a block queued by a block): no eventfd, no stamp.
        // (The outer block woke the loop, and stamped; the inner one must not.)
        #expect(eventually { loop.blockedInWait.load(ordering: .acquiring) })
        let stampAfterOuter = Atomic<Int64>(0)
        let second = Atomic<Bool>(false)
        try thread.perform(waitUntilDone: true) {
            loop.perform { second.store(true, ordering: .releasing) }
            stampAfterOuter.store(loop.handedOverAt.load(ordering: .relaxed), ordering: .relaxed)
        }
        #expect(eventually { second.load(ordering: .acquiring) })
        #expect(stampAfterOuter.load(ordering: .relaxed) > stamp)
        #expect(loop.handedOverAt.load(ordering: .relaxed) == stampAfterOuter.load(ordering: .relaxed))
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
