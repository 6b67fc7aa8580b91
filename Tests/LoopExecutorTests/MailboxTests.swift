import Testing

@testable import LoopExecutor
@testable import LoopRuntime

/// A buffer that keeps everything, in order, and wants a hand-off from three elements on.
private struct Queue: MailboxBuffer {
    var elements: [Int] = []
    mutating func append(_ element: Int) { elements.append(element) }
    mutating func removeFirst() -> Int? { elements.isEmpty ? nil : elements.removeFirst() }
    mutating func removeAll() { elements.removeAll() }
    var wantsHandOff: Bool { elements.count >= 3 }
}

/// The state machine with waiters named by numbers instead of continuations.
private typealias Machine = MailboxState<Queue, Int>

private func waiter(_ id: Int, batches: Bool = false) -> Machine.Waiter {
    Machine.Waiter(continuation: id, hopTarget: nil, takesBatches: batches)
}

/// What `next` said, comparable.
private func describe(_ action: Machine.NextAction) -> String {
    switch action {
    case .deliver(let element): "deliver \(element.map(String.init) ?? "nil")"
    case .suspend: "suspend"
    case .trapSecondConsumer: "trap"
    }
}

private func describe(_ resumption: Machine.Resumption?) -> String {
    guard let resumption else { return "none" }
    return "resume \(resumption.waiter.continuation) with \(resumption.value.map(String.init) ?? "nil")"
}

@Suite("The single-consumer mailbox behind sleep, ticks, activities and mode switches", .timeLimit(.minutes(3)))
struct MailboxTests {
    @Test("A waiting consumer is resumed exactly once, by the first of send and finish")
    func exactlyOnce() {
        var machine = Machine(buffer: Queue())
        #expect(describe(machine.next(waiter(1))) == "suspend")
        #expect(describe(machine.send(7)) == "resume 1 with 7")
        // Nobody waits any more: the next value is kept, and the end resumes nobody.
        #expect(describe(machine.send(8)) == "none")
        let ending = machine.finish(drain: true, failure: nil)
        #expect(describe(ending?.resumption) == "none")
        #expect(describe(machine.next(waiter(2))) == "deliver 8")
        #expect(describe(machine.next(waiter(2))) == "deliver nil")
        // A second end (a cancellation racing the loop's end) is a no-op: the first one won.
        #expect(machine.finish(drain: false, failure: CancellationError()) == nil)
        #expect(machine.failure == nil)
    }

    @Test("An end resumes the waiter with nil and keeps its failure; later sends are dropped")
    func endResumesWaiter() {
        var machine = Machine(buffer: Queue())
        #expect(describe(machine.next(waiter(1))) == "suspend")
        let ending = machine.finish(drain: false, failure: CancellationError())
        #expect(describe(ending?.resumption) == "resume 1 with nil")
        #expect(machine.failure is CancellationError)
        #expect(describe(machine.send(3)) == "none")
        #expect(describe(machine.next(waiter(2))) == "deliver nil")
    }

    @Test("Finishing with a last element hands it to the waiter, or keeps it for a later next()")
    func finishDelivering() {
        var waiting = Machine(buffer: Queue())
        #expect(describe(waiting.next(waiter(1))) == "suspend")
        #expect(describe(waiting.finish(delivering: 9)?.resumption) == "resume 1 with 9")
        #expect(waiting.finish(delivering: 10) == nil)  // the first end wins
        var later = Machine(buffer: Queue())
        #expect(describe(later.finish(delivering: 9)?.resumption) == "none")
        #expect(describe(later.next(waiter(1))) == "deliver 9")
        #expect(describe(later.next(waiter(1))) == "deliver nil")
    }

    @Test("A second consumer while one waits is told to trap; one after the other is fine")
    func secondConsumer() {
        var machine = Machine(buffer: Queue())
        #expect(describe(machine.next(waiter(1))) == "suspend")
        #expect(describe(machine.next(waiter(2))) == "trap")
        #expect(describe(machine.send(5)) == "resume 1 with 5")
        #expect(describe(machine.next(waiter(2))) == "suspend")
    }

    @Test("A consumer taking batches is resumed at batch points or when the buffer wants a hand-off")
    func batches() {
        var machine = Machine(buffer: Queue())
        #expect(describe(machine.next(waiter(1, batches: true))) == "suspend")
        #expect(describe(machine.send(1)) == "none")
        #expect(describe(machine.send(2)) == "none")
        #expect(describe(machine.send(nil, isBatchPoint: true)) == "resume 1 with 1")
        #expect(describe(machine.next(waiter(1, batches: true))) == "deliver 2")
        #expect(describe(machine.next(waiter(1, batches: true))) == "suspend")
        #expect(describe(machine.send(3)) == "none")
        #expect(describe(machine.send(4)) == "none")
        #expect(describe(machine.send(5)) == "resume 1 with 3")  // three kept: hand them off
        // A batch point with nothing kept resumes nobody.
        #expect(describe(machine.next(waiter(1, batches: true))) == "deliver 4")
        #expect(describe(machine.next(waiter(1, batches: true))) == "deliver 5")
        #expect(describe(machine.next(waiter(1, batches: true))) == "suspend")
        #expect(describe(machine.send(nil, isBatchPoint: true)) == "none")
    }

    @Test("A draining end hands a waiting batch consumer what is kept before the end")
    func drainingEndDeliversBatch() {
        var machine = Machine(buffer: Queue())
        #expect(describe(machine.next(waiter(1, batches: true))) == "suspend")
        _ = machine.send(1)
        _ = machine.send(2)
        let ending = machine.finish(drain: true, failure: nil)
        #expect(describe(ending?.resumption) == "resume 1 with 1")
        #expect(describe(machine.next(waiter(1))) == "deliver 2")
        #expect(describe(machine.next(waiter(1))) == "deliver nil")
        // Without draining, what was kept is gone.
        var other = Machine(buffer: Queue())
        _ = other.send(1)
        _ = other.finish(drain: false, failure: nil)
        #expect(describe(other.next(waiter(1))) == "deliver nil")
    }

    @Test("A registration made after the end is refused (the caller undoes it); one before is returned by the end")
    func registration() {
        let loop = Loop(waiter: ManualWaiter())
        var machine = Machine(buffer: Queue())
        let registration = Machine.Registration(loop: loop, endHandler: 1, detachProducer: {})
        let attached = machine.attach(registration)
        #expect(attached)
        let ending = machine.finish(drain: false, failure: nil)
        #expect(ending?.registration?.endHandler == 1)
        let attachedAfterEnd = machine.attach(registration)
        #expect(!attachedAfterEnd)
    }

    @Test("Keeping an element when nobody waits does what send does, and leaves waiting and finished mailboxes to send")
    func keepIfNobodyWaits() {
        var machine = Machine(buffer: Queue())
        let keptWhileOpen = machine.keepIfNobodyWaits(1)
        let keptBatchPoint = machine.keepIfNobodyWaits(nil)  // a batch point with nothing to keep
        #expect(keptWhileOpen && keptBatchPoint)
        #expect(describe(machine.next(waiter(1))) == "deliver 1")
        #expect(describe(machine.next(waiter(1))) == "suspend")
        let keptWhileWaiting = machine.keepIfNobodyWaits(2)  // a waiter: send must resume it
        #expect(!keptWhileWaiting)
        #expect(describe(machine.send(2)) == "resume 1 with 2")
        _ = machine.finish(drain: false, failure: nil)
        let keptWhenFinished = machine.keepIfNobodyWaits(3)  // finished: send drops it
        #expect(!keptWhenFinished)
        #expect(describe(machine.next(waiter(2))) == "deliver nil")
    }

    @Test("The latest-tick buffer folds superseded ticks into the missed count (SPEC R37)")
    func latestTick() {
        var buffer = LatestTick()
        let start = ContinuousClock.now
        buffer.append(LoopTick(date: start, missed: 0))
        buffer.append(LoopTick(date: start + .seconds(1), missed: 2))  // the loop skipped two
        let tick = buffer.removeFirst()
        #expect(tick == LoopTick(date: start + .seconds(1), missed: 3))
        #expect(buffer.removeFirst() == nil)
    }

    @Test("Ticks and activity events give back exactly the instants they were made with")
    func storedInstants() {
        let now = ContinuousClock.now
        for instant in [now, now - .seconds(86_400 * 365), now + .nanoseconds(1), now + .seconds(86_400 * 365 * 200)] {
            #expect(LoopTick(date: instant, missed: 0).date == instant)
            let event = LoopActivityEvent(activity: .exit, mode: "m", time: instant, depth: 1, dropped: 0)
            #expect(event.time == instant)
            #expect(event.stamped(dropped: 3).time == instant)
        }
        #expect(LoopTick(date: now, missed: 0) != LoopTick(date: now + .nanoseconds(1), missed: 0))
    }

    @Test("The activity ring drops by its policy and stamps the drops on the next delivery")
    func activityRing() {
        func event(_ depth: Int) -> LoopActivityEvent {
            LoopActivityEvent(activity: .entry, mode: .default, time: .now, depth: depth, dropped: 0)
        }
        var oldest = ActivityRing(.dropOldest(capacity: 2))
        for depth in 1...4 { oldest.append(event(depth)) }
        #expect(oldest.wantsHandOff)
        #expect(oldest.removeFirst().map { [$0.depth, $0.dropped] } == [3, 2])
        #expect(oldest.removeFirst().map { [$0.depth, $0.dropped] } == [4, 0])
        #expect(oldest.removeFirst() == nil)
        var newest = ActivityRing(.dropNewest(capacity: 2))
        for depth in 1...4 { newest.append(event(depth)) }
        #expect(newest.removeFirst().map { [$0.depth, $0.dropped] } == [1, 2])
        #expect(newest.removeFirst().map { [$0.depth, $0.dropped] } == [2, 0])
        #expect(!newest.wantsHandOff)
    }
    @Test("The stall ring keeps the newest or the oldest reports by its policy and counts the drops")
    func stallRing() {
        func stall(_ depth: Int) -> Loop.Stall {
            Loop.Stall(
                scope: .pass, duration: .milliseconds(depth), culprit: nil, label: nil, mode: .default, depth: depth,
                endNanoseconds: 0)
        }
        var newest = StallRing(.dropOldest(capacity: 2))
        for depth in 1...4 { newest.append(stall(depth)) }
        #expect(newest.removeFirst().map { [$0.depth, $0.dropped] } == [3, 2])
        #expect(newest.removeFirst().map { [$0.depth, $0.dropped] } == [4, 0])
        #expect(newest.removeFirst() == nil)
        var oldest = StallRing(.dropNewest(capacity: 2))
        for depth in 1...4 { oldest.append(stall(depth)) }
        #expect(oldest.removeFirst().map { [$0.depth, $0.dropped] } == [1, 2])
        #expect(oldest.removeFirst().map { [$0.depth, $0.dropped] } == [2, 0])
        #expect(oldest.removeFirst() == nil)
    }
}
