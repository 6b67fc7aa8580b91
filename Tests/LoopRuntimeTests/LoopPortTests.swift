import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// SPEC R54: message ports.
@Suite("LoopPort (SPEC R54)", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct LoopPortTests {
    static let messagesPerSender = Int(getenv("LOOP_STRESS_ITERATIONS").map { String(cString: $0) } ?? "") ?? 100_000

    @Test("R54 messages from four senders: none lost, each sender's in order, on the loop's thread")
    func manySenders() throws {
        let perSender = Self.messagesPerSender
        let thread = try LoopThread(name: "port-consumer")
        defer { thread.shutdown() }
        struct Message: Sendable {
            let sender: Int
            let sequence: Int
        }
        let lastSeen = Locked<[Int]>(Array(repeating: -1, count: 4))
        let outOfOrder = Counter()
        let received = Counter()
        let wrongThread = Counter()
        let port = try LoopPort<Message> { message in
            if !thread.loop.isCurrentThread { wrongThread.increment() }
            lastSeen.withLock {
                if $0[message.sender] + 1 != message.sequence { outOfOrder.increment() }
                $0[message.sender] = message.sequence
            }
            received.increment()
        }
        try thread.loop.add(port, forMode: .default)
        let senders = try (0..<4).map { sender in
            try PlatformThread.spawn(name: "sender-\(sender)") {
                for sequence in 0..<perSender {
                    try? port.send(Message(sender: sender, sequence: sequence))
                }
            }
        }
        senders.forEach { $0.join() }
        #expect(eventually(timeout: .seconds(120)) { received.count == 4 * perSender })
        #expect(received.count == 4 * perSender)
        #expect(outOfOrder.count == 0)
        #expect(wrongThread.count == 0)
        #expect(port.pendingCount == 0)
    }

    @Test("R54 a burst sent to a sleeping loop is delivered after one wake-up, in send order")
    func burstCoalesces() throws {
        let loop = try makeEpollLoop()
        let trace = Trace()
        loop.add(tracing(trace, .afterWaiting), forMode: .default)
        let port = try LoopPort<Int> { trace.append("\($0)") }
        try loop.add(port, forMode: .default)
        let sender = try PlatformThread.spawn {
            _ = eventually { loop.isWaiting }
            for value in 1...5 { try? port.send(value) }
        }
        loop.run(.default, for: .seconds(10), returnAfterSourceHandled: true)
        sender.join()
        // One wake-up; all five may or may not have been queued by then, so drain the rest.
        loop.run(.default, for: .zero)
        #expect(trace.all.filter { $0 != "AW" } == ["1", "2", "3", "4", "5"])
        #expect(trace.all.first == "AW")
    }

    @Test("R54 an idle port keeps its mode alive; messages wait for one of the port's modes")
    func keepsAliveAndWaitsForItsModes() throws {
        let loop = try makeEpollLoop()
        let received = Trace()
        let port = try LoopPort<String> { received.append($0) }
        try loop.add(port, forMode: "ports")
        #expect(loop.run("ports", for: .milliseconds(10)) == .timedOut)  // alive (SPEC R10)
        try port.send("hello")
        loop.add(keepAliveSource(), forMode: .default)
        loop.run(.default, for: .milliseconds(10))
        #expect(received.all.isEmpty)
        loop.run("ports", for: .seconds(10), returnAfterSourceHandled: true)
        #expect(received.text == "hello")
    }

    @Test("R54 invalidate returns the undelivered messages; later sends throw")
    func invalidate() throws {
        let loop = try makeEpollLoop()
        let port = try LoopPort<Int> { _ in }
        try loop.add(port, forMode: .default)
        try port.send(1)
        try port.send(2)
        #expect(port.pendingCount == 2)
        #expect(port.invalidate() == [1, 2])
        #expect(!port.isValid)
        #expect(throws: LoopPort<Int>.SendError.invalidated) { try port.send(3) }
        #expect(!loop.contains(port, forMode: .default))
    }

    @Test("Bad input: a send to a port whose loop thread ended returns an error to the sender")
    func loopEnded() throws {
        let port = try LoopPort<Int> { _ in }
        try onNewThread {
            try? Loop.current.add(port, forMode: .default)
        }
        let error = #expect(throws: LoopPort<Int>.SendError.self) { try port.send(1) }
        guard case .loopEnded(let loop) = error else {
            Issue.record("expected .loopEnded, got \(String(describing: error))")
            return
        }
        #expect(loop.contains("test-thread"))
    }
}
