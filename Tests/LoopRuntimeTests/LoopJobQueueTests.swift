import Testing

@_spi(LoopExecutorSupport) @testable import LoopRuntime

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

    @Test("N2 one pass runs the jobs queued when the step began; their jobs run in the next pass")
    func jobsOfJobsRunNextPass() {
        let (loop, _) = makeManualLoop()
        let trace = Trace()
        loop.add(keepAliveSource(), forMode: .default)
        loop.add(tracing(trace, .beforeSources), forMode: .default)
        let queueBox = Locked<LoopJobQueue?>(nil)
        let queue = LoopJobQueue(loop: loop, modes: [.default]) { job in
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
}
