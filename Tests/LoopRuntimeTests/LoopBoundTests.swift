import Synchronization
import Testing

@testable import LoopRuntime

/// A class that is not `Sendable`: the kind of state `LoopBound` carries.
private final class BoundCounter {
    var count = 0
}

/// `LoopBound`, `LoopBoundBox` and the on-loop checks (SwiftNIO's `NIOLoopBound`,
/// `preconditionInEventLoop`): values confined to a loop's thread, checked on every access.
@Suite("Loop-bound values and on-loop checks (SPEC R7)", .timeLimit(.minutes(3)))
struct LoopBoundTests {
    @Test("A LoopBound made on the loop's thread is read and changed there, in place")
    func boundValueOnItsLoop() throws {
        let thread = try LoopThread(name: "bound")
        defer { thread.shutdown() }
        let seen = Mutex<[Int]>([])
        try thread.perform(waitUntilDone: true) {
            var bound = LoopBound(BoundCounter(), loop: Loop.current)
            bound.value.count += 1
            bound.withValue { $0.count += 10 }
            let copy = bound  // a copy of the box: the same BoundCounter instance
            try? thread.perform(waitUntilDone: false) {
                copy.value.count += 100
                seen.withLock { $0.append(copy.value.count) }
            }
            var number = LoopBound(1, loop: Loop.current)
            number.value += 1
            let numberCopy = number
            number.value += 1
            seen.withLock { $0.append(number.value * 1_000 + numberCopy.value) }  // copies are values
        }
        try thread.perform(waitUntilDone: true) {}
        #expect(seen.withLock { $0 } == [3_002, 111])
    }

    @Test("init(sending:loop:) binds a value made on another thread")
    func sendingFromAnotherThread() throws {
        let thread = try LoopThread(name: "bound-sending")
        defer { thread.shutdown() }
        let bound = LoopBound(sending: BoundCounter(), loop: thread.loop)
        let count = Mutex(0)
        try thread.perform(waitUntilDone: true) {
            bound.value.count = 5
            count.withLock { $0 = bound.value.count }
        }
        #expect(count.withLock { $0 } == 5)
    }

    @Test("A LoopBoundBox is one value for every closure that holds it")
    func boxIsShared() throws {
        let thread = try LoopThread(name: "bound-box")
        defer { thread.shutdown() }
        let box = LoopBoundBox(sending: [String](), loop: thread.loop)
        for word in ["a", "b", "c"] {
            try thread.perform { box.value.append(word) }
        }
        let result = Mutex<[String]>([])
        try thread.perform(waitUntilDone: true) {
            box.withValue { $0.append("d") }
            result.withLock { $0 = box.value }
        }
        #expect(result.withLock { $0 } == ["a", "b", "c", "d"])
    }

    @Test("R7 reading a LoopBound off its loop's thread traps, naming the loop and the thread")
    func offLoopAccessTraps() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let thread = try LoopThread(name: "bound-owner")
            let bound = LoopBound(sending: 1, loop: thread.loop)
            _ = bound.value
        }
        let message = String(decoding: exit.standardErrorContent, as: UTF8.self)
        #expect(message.contains("Expected to run on the thread of the loop of thread 'bound-owner'"))
        #expect(message.contains("LoopBound.value"))
    }

    @Test("R7 changing a LoopBoundBox off its loop's thread traps, naming the box")
    func offLoopBoxWriteTraps() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let thread = try LoopThread(name: "box-owner")
            let box = LoopBoundBox(sending: 1, loop: thread.loop)
            box.value = 2
        }
        let message = String(decoding: exit.standardErrorContent, as: UTF8.self)
        #expect(message.contains("LoopBoundBox.value"))
        #expect(message.contains("'box-owner'"))
    }

    @Test("LoopBoundBox(_:loop:) off the loop's thread traps, naming the box")
    func unsentBoxInitOffLoopTraps() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let thread = try LoopThread(name: "box-init")
            _ = LoopBoundBox(1, loop: thread.loop)
        }
        let message = String(decoding: exit.standardErrorContent, as: UTF8.self)
        #expect(message.contains("LoopBoundBox.init: the value must be made on the loop's thread"))
    }

    @Test("LoopBound(_:loop:) off the loop's thread traps: the value was made elsewhere")
    func unsentInitOffLoopTraps() async {
        await #expect(processExitsWith: .failure) {
            let thread = try LoopThread(name: "bound-init")
            _ = LoopBound(1, loop: thread.loop)
        }
    }

    @Test("preconditionOnLoop and preconditionNotOnLoop pass where they should")
    func checksPass() throws {
        let thread = try LoopThread(name: "checks")
        defer { thread.shutdown() }
        thread.preconditionNotOnLoop()
        thread.loop.preconditionNotOnLoop()
        thread.assertNotOnLoop()
        let passed = Atomic<Bool>(false)
        try thread.perform(waitUntilDone: true) {
            thread.preconditionOnLoop()
            thread.loop.preconditionOnLoop("in a block")
            thread.assertOnLoop()
            thread.loop.assertOnLoop()
            passed.store(true, ordering: .relaxed)
        }
        let didPass = passed.load(ordering: .relaxed)
        #expect(didPass)
    }

    @Test("preconditionOnLoop off the loop traps with the caller's message")
    func preconditionOnLoopTraps() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let thread = try LoopThread(name: "checked")
            thread.loop.preconditionOnLoop("touching the socket")
        }
        #expect(String(decoding: exit.standardErrorContent, as: UTF8.self).contains("(touching the socket)"))
    }

    @Test("preconditionNotOnLoop on the loop traps: a wait for the loop would never end there")
    func preconditionNotOnLoopTraps() async throws {
        let exit = try await #require(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            let thread = try LoopThread(name: "checked-not")
            try thread.perform(waitUntilDone: true) { thread.preconditionNotOnLoop() }
        }
        #expect(String(decoding: exit.standardErrorContent, as: UTF8.self).contains("would wait for ever"))
    }

    #if DEBUG
        @Test("assertOnLoop traps off the loop in a debug build")
        func assertOnLoopTraps() async {
            await #expect(processExitsWith: .failure) {
                let thread = try LoopThread(name: "asserted")
                thread.assertOnLoop()
            }
        }
    #endif
}
