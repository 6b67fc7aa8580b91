import Dispatch
import LoopExecutor
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

@Suite("Activity stream", .serialized, .timeLimit(.minutes(3)))
struct ActivityStreamTests {
    /// A loop on its own thread that runs `work` when told to, then exits.
    final class Runner: @unchecked Sendable {
        // `loop` is written before `ready` is signalled and read after.
        var loop: Loop!
        let ready = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let thread: PlatformThread

        init(_ work: @escaping @Sendable (Loop) -> Void) throws {
            let box = Box()
            thread = try PlatformThread.spawn(name: "activity") {
                let loop = Loop.current
                box.runner?.loop = loop
                box.runner?.ready.signal()
                box.runner?.go.wait()
                work(loop)
            }
            box.runner = self
            _ = box
        }

        final class Box: @unchecked Sendable {
            // Set right after spawning, before the thread uses it (it waits on `ready` first).
            var runner: Runner?
        }
    }

    @Test("The stream's events for a known run match SPEC exactly: E BT BS BW AW, the timer, X")
    func exactSequence() async throws {
        let started = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let loopBox = LoopBox()
        let thread = try PlatformThread.spawn(name: "exact") {
            let loop = Loop.current
            loopBox.loop = loop
            started.signal()
            go.wait()
            loop.add(LoopTimer(after: .milliseconds(10)) { _ in }, forMode: .default)
            _ = loop.run(.default, for: .seconds(10))
        }
        defer { thread.join() }
        await started.waitAsync()
        let loop = try #require(loopBox.loop)
        var iterator = loop.activities().makeAsyncIterator()
        go.signal()
        var seen: [String] = []
        while let event = await iterator.next() {
            seen.append("\(event.activity)")
            #expect(event.mode == .default && event.depth == 1 && event.dropped == 0)
            if event.activity == .exit { break }
        }
        #expect(seen == ["E", "BT", "BS", "BW", "AW", "X"])
    }

    @Test("A stream keeps for its first next() what happened after it was made (issue #36): a whole run before it")
    func eventsBeforeTheFirstNext() async throws {
        let started = DispatchSemaphore(value: 0)
        let go = DispatchSemaphore(value: 0)
        let loopBox = LoopBox()
        let thread = try PlatformThread.spawn(name: "before-next") {
            let loop = Loop.current
            loopBox.loop = loop
            started.signal()
            go.wait()
            loop.add(LoopTimer(after: .milliseconds(10)) { _ in }, forMode: .default)
            _ = loop.run(.default, for: .seconds(10))
        }
        await started.waitAsync()
        let loop = try #require(loopBox.loop)
        let stream = loop.activities()  // the observer is added here, not at the first next()
        go.signal()
        thread.join()  // the run is over, and the loop's thread has ended
        var seen: [String] = []
        for await event in stream { seen.append("\(event.activity)") }
        #expect(seen == ["E", "BT", "BS", "BW", "AW", "X"])
    }

    @Test("A second iteration of one stream value gets the events from its own start, the first keeps its own")
    func secondIterationStartsFresh() async throws {
        let (loop, _) = makeManualLoopForActivities()
        loop.add(LoopSource {}, forMode: .default)  // a mode with an item: runs notify entry and exit
        let stream = loop.activities([.entry, .exit], inModes: [.default])
        loop.run(.default, for: .zero)  // E X, for the first iterator only
        var first = stream.makeAsyncIterator()
        var second = stream.makeAsyncIterator()  // observes from here
        loop.run(.default, for: .zero)  // E X, for both
        loop.tearDown()  // ends both streams after what they buffered
        var firstSeen: [String] = []
        while let event = await first.next() { firstSeen.append("\(event.activity)") }
        var secondSeen: [String] = []
        while let event = await second.next() { secondSeen.append("\(event.activity)") }
        #expect(firstSeen == ["E", "X", "E", "X"])
        #expect(secondSeen == ["E", "X"])
    }

    @Test("A stream that is never iterated removes its observer when its last copy goes away")
    func unusedStreamLeaves() throws {
        let thread = try LoopThread(name: "stream-unused")
        defer { thread.shutdown() }
        let loop = thread.loop
        try thread.perform(waitUntilDone: true) {}  // the thread's driver has added its observer
        let observers = {
            loop.lock.withLock { loop.state.modes[.default]?.observerActivities.load(ordering: .relaxed) }
        }
        let driverOnly = Loop.Activity([.entry, .beforeWaiting]).rawValue
        #expect(observers() == driverOnly)
        func makeAndDrop() {
            let stream = loop.activities([.afterWaiting])
            #expect(observers() != driverOnly)  // added when made
            _ = stream
        }
        makeAndDrop()
        #expect(observers() == driverOnly)
    }

    @Test("Overflow: drop-oldest keeps the newest events and reports every drop", arguments: [true, false])
    func overflow(dropOldest: Bool) async throws {
        let (loop, _) = makeManualLoopForActivities()
        defer { loop.tearDown() }  // the loop is no thread's: nothing else lets go of its items
        loop.add(LoopSource {}, forMode: .default)
        let buffering: LoopBuffering = dropOldest ? .dropOldest(capacity: 3) : .dropNewest(capacity: 3)
        var iterator = loop.activities([.entry, .exit], buffering: buffering).makeAsyncIterator()
        for _ in 0..<5 { loop.run(.default, for: .zero) }  // 10 events, nobody consuming
        var delivered: [String] = []
        var dropped = 0
        for _ in 0..<3 {
            let event = try #require(await iterator.next())
            delivered.append("\(event.activity)")
            dropped += event.dropped
        }
        #expect(dropped == 7)
        #expect(delivered == (dropOldest ? ["X", "E", "X"] : ["E", "X", "E"]))
    }

    @Test("An event's time is the loop's clock reading: shared between callouts, read again after one")
    func eventTimes() async throws {
        let (loop, waiter) = makeManualLoopForActivities()
        defer { loop.tearDown() }  // the loop is no thread's: nothing else lets go of its items
        let start = LoopTime.instant(waiter.now())
        // A timer whose callout takes 5 ms of the loop's (virtual) time.
        loop.add(LoopTimer(fireAt: start) { _ in waiter.advance(by: .milliseconds(5)) }, forMode: .default)
        loop.add(LoopSource {}, forMode: .default)
        var iterator = loop.activities([.entry, .beforeTimers, .beforeSources, .exit]).makeAsyncIterator()
        loop.run(.default, for: .zero)
        var times: [String: ContinuousClock.Instant] = [:]
        for _ in 0..<4 {
            let event = try #require(await iterator.next())
            times["\(event.activity)"] = event.time
        }
        // E, BT and BS share the run's reading; the timer fires late in the pass (SPEC R19 step
        // 10), so X carries the reading taken after its callout.
        #expect(times["E"] == start && times["BT"] == start && times["BS"] == start)
        #expect(times["X"] == start + .milliseconds(5))
    }

    @Test("An event notified after a user's observer of the same activity carries the time after it")
    func eventTimeAfterUserObserver() async throws {
        let (loop, waiter) = makeManualLoopForActivities()
        defer { loop.tearDown() }  // the loop is no thread's: nothing else lets go of its items
        let start = LoopTime.instant(waiter.now())
        loop.add(LoopSource {}, forMode: .default)
        // Called before the stream's observer (which comes last): takes 20 ms of virtual time.
        loop.add(LoopObserver(activities: .entry) { _, _ in waiter.advance(by: .milliseconds(20)) }, forMode: .default)
        var iterator = loop.activities([.entry]).makeAsyncIterator()
        loop.run(.default, for: .zero)
        let event = try #require(await iterator.next())
        #expect(event.time == start + .milliseconds(20))
    }

    @Test("The stream ends (after its buffered events) when the loop's thread ends")
    func endsWithThread() async throws {
        let thread = try LoopThread(name: "stream-end")
        var iterator = thread.loop.activities([.entry]).makeAsyncIterator()
        await thread.shutdown()
        var count = 0
        while await iterator.next() != nil { count += 1 }
        #expect(count >= 0)  // whatever was buffered, then the end
        #expect(await iterator.next() == nil)
    }

    @Test("Cancelling the consumer ends the stream and removes its observer")
    func cancelled() async throws {
        let thread = try LoopThread(name: "stream-cancel")
        defer { thread.shutdown() }
        let loop = thread.loop
        let consumer = Task {
            var count = 0
            for await _ in loop.activities() { count += 1 }
            return count
        }
        try await Task.sleep(for: .milliseconds(20))
        consumer.cancel()
        _ = await consumer.value
        // No observer is left in the default mode: its activity mask is back to the driver's own.
        let mask = loop.lock.withLock { loop.state.modes[.default]!.observerActivities.load(ordering: .relaxed) }
        #expect(mask == Loop.Activity([.entry, .beforeWaiting]).rawValue)
    }
}

/// A loop with a manual waiter on the calling thread (virtual time).
func makeManualLoopForActivities() -> (Loop, ManualWaiter) {
    let waiter = ManualWaiter()
    return (Loop(waiter: waiter), waiter)
}
