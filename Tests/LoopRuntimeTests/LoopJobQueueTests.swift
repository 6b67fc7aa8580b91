import Testing

@testable import LoopRuntime

/// SPEC N1–N4 at the loop's level, with placeholder jobs (never handed to the Swift runtime) and a
/// manual waiter: deterministic, pass by pass.
@Suite("LoopJobQueue (SPEC N1–N4)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopJobQueueTests {
    /// A placeholder job: only its number matters.
    private func job(_ number: UInt) -> UnownedJob {
        unsafeBitCast(UnsafeRawPointer(bitPattern: number)!, to: UnownedJob.self)
    }

    private func number(_ job: UnownedJob) -> UInt {
        UInt(bitPattern: unsafeBitCast(job, to: UnsafeRawPointer.self))
    }

    @Test("N1 jobs run in step 4, after the signalled sources, in enqueue order, as a handled source")
    func orderAndHandled() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let source = LoopSource { trace.append("source") }
        loop.add(source, forMode: .default)
        let queue = LoopJobQueue(loop: loop, modes: [.common]) { job in trace.append("job\(self.number(job))") }
        for index: UInt in 1...3 { queue.enqueue(job(index)) }
        source.signal()
        loop.perform(inModes: [.default]) { trace.append("block") }
        #expect(loop.run(.default, for: .zero, returnAfterSourceHandled: false) == .timedOut)
        #expect(trace.text == "block source job1 job2 job3")
        queue.enqueue(job(4))
        #expect(loop.run(.default, for: .seconds(1), returnAfterSourceHandled: true) == .handledSource)
    }

    @Test(
        "N2 one pass runs the jobs queued when the step began; their jobs run in the next pass",
        arguments: [false, true])
    func jobsOfJobsRunNextPass(stealable: Bool) {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        loop.add(keepAliveSource(), forMode: .default)
        loop.add(tracing(trace, .beforeSources), forMode: .default)
        let queueBox = Locked<LoopJobQueue?>(nil)
        let queue = LoopJobQueue(loop: loop, modes: [.default], stealable: stealable) { job in
            trace.append("job\(self.number(job))")
            if self.number(job) == 1 { queueBox.withLock { $0 }?.enqueue(self.job(2)) }
        }
        queueBox.withLock { $0 = queue }
        queue.enqueue(job(1))
        loop.run(.default, for: .zero)
        #expect(trace.text == "BS job1")
        loop.run(.default, for: .zero)
        #expect(trace.text == "BS job1 BS job2")
    }

    @Test("N3 a nested run started inside a job does not run the same queue's jobs")
    func noReentrancy() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        loop.add(keepAliveSource(), forMode: .default)
        let queueBox = Locked<LoopJobQueue?>(nil)
        let queue = LoopJobQueue(loop: loop, modes: [.default]) { job in
            trace.append("job\(self.number(job))")
            guard self.number(job) == 1 else { return }
            queueBox.withLock { $0 }?.enqueue(self.job(2))
            loop.run(.default, for: .zero)  // a nested run: must not run job 2
            trace.append("nested-done")
        }
        queueBox.withLock { $0 = queue }
        queue.enqueue(job(1))
        loop.run(.default, for: .zero)
        loop.run(.default, for: .zero)
        #expect(trace.text == "job1 nested-done job2")
    }

    @Test("N4 queued jobs keep their modes alive; an idle queue does not; jobs wait for their modes")
    func keepsModesAlive() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        let queue = LoopJobQueue(loop: loop, modes: ["jobs"]) { job in trace.append("job\(self.number(job))") }
        #expect(loop.run("jobs", for: .seconds(1)) == .finished)
        queue.enqueue(job(7))
        loop.add(keepAliveSource(), forMode: .default)
        loop.run(.default, for: .zero)
        #expect(trace.all.isEmpty)  // not one of the queue's modes
        #expect(loop.run("jobs", for: .zero) == .timedOut)
        #expect(trace.text == "job7")
    }

    @Test("M2 only the first job of an idle queue wakes a loop sleeping in one of its modes")
    func wakesOncePerIdleToBusy() {
        let (loop, waiter) = makeManualLoop()
        loop.add(keepAliveSource(), forMode: .default)
        let ran = Counter()
        let queue = LoopJobQueue(loop: loop, modes: [.common]) { _ in ran.increment() }
        let waits = Counter()
        waiter.duringWait.withLock {
            $0 = { _ in
                guard waits.increment() == 1 else { return loop.stop() }
                for index: UInt in 1...50 { queue.enqueue(self.job(index)) }
            }
        }
        #expect(loop.run(.default) == .stopped)
        #expect(ran.count == 50)
        #expect(waiter.wakeCalls == 2)  // the burst of 50 jobs, then the stop
    }

    /// Two loops sharing work: `stealable` queues on each, tracing which loop ran which job.
    private func stealablePair(_ trace: Trace) -> (Loop, LoopJobQueue, Loop, LoopJobQueue) {
        let (first, _) = makeManualLoop()
        let (second, _) = makeManualLoop()
        let a = LoopJobQueue(loop: first, modes: [.common], stealable: true) { job in
            trace.append("A\(self.number(job))")
        }
        let b = LoopJobQueue(loop: second, modes: [.common], stealable: true) { job in
            trace.append("B\(self.number(job))")
        }
        return (first, a, second, b)
    }

    @Test("A stealable queue gives its oldest jobs, in order, to another loop's queue; the rest stay")
    func moveOldestInOrder() {
        let trace = Trace()
        let (first, a, second, b) = stealablePair(trace)
        for index: UInt in 1...5 { a.enqueue(job(index)) }
        b.enqueue(job(9))
        #expect(a.moveOldest(upTo: 3, to: b) == 3)
        #expect(a.count == 2)
        #expect(b.count == 4)
        #expect(second.run(.default, for: .zero) == .timedOut)
        #expect(trace.text == "B9 B1 B2 B3")
        #expect(first.run(.default, for: .zero) == .timedOut)
        #expect(trace.text == "B9 B1 B2 B3 A4 A5")
        #expect(a.moveOldest(upTo: 3, to: b) == 0)  // nothing left to take
    }

    @Test("A job taken from a stealable queue during its pass runs only on the loop that took it")
    func movedDuringAPass() {
        let trace = Trace()
        let (first, _) = makeManualLoop()
        let (second, _) = makeManualLoop()
        let bBox = Locked<LoopJobQueue?>(nil)
        let aBox = Locked<LoopJobQueue?>(nil)
        let a = LoopJobQueue(loop: first, modes: [.common], stealable: true) { job in
            trace.append("A\(self.number(job))")
            // Another loop takes the next job while this one runs (as a spinning loop does).
            if self.number(job) == 1, let a = aBox.withLock({ $0 }), let b = bBox.withLock({ $0 }) {
                _ = a.moveOldest(upTo: 1, to: b)
            }
        }
        let b = LoopJobQueue(loop: second, modes: [.common]) { job in trace.append("B\(self.number(job))") }
        aBox.withLock { $0 = a }
        bBox.withLock { $0 = b }
        for index: UInt in 1...3 { a.enqueue(job(index)) }
        first.run(.default, for: .zero)
        #expect(trace.text == "A1 A3")
        second.run(.default, for: .zero)
        #expect(trace.text == "A1 A3 B2")
        #expect(a.count == 0 && b.count == 0)
    }

    @Test("Jobs do not move to a queue that has closed: they stay, and run, where they were")
    func noMoveToAClosedQueue() {
        let trace = Trace()
        let (first, a, _, b) = stealablePair(trace)
        b.retire()
        for index: UInt in 1...3 { a.enqueue(job(index)) }
        #expect(a.moveOldest(upTo: 2, to: b) == 0)
        #expect(a.count == 3)
        first.run(.default, for: .zero)
        #expect(trace.text == "A1 A2 A3")
    }
}
