// EchoServer — a non-blocking TCP line server on 127.0.0.1 built on descriptor sources. Each
// connection's state lives in an actor pinned to the server's loop thread; its descriptor source
// changes what it waits for as the output queue fills and drains (write backpressure, and reading
// paused while a slow peer lets the queue grow). A built-in client on a second loop thread opens
// a few connections, sends every line, and checks that each one came back, in order; then the
// program stops by itself.
//
//   swift run EchoServer [connections] [lines per connection]

import Glibc
import LoopExecutor
import LoopRuntime
import Synchronization

// MARK: - Sockets

struct SocketError: Error, CustomStringConvertible {
    let call: String
    let errno: Int32
    var description: String { "\(call) failed: \(String(cString: strerror(errno))) (errno \(errno))" }
}

enum Socket {
    /// A non-blocking listening socket on 127.0.0.1 and the port the kernel chose.
    static func listen() throws -> (descriptor: Int32, port: UInt16) {
        let descriptor = socket(
            AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SocketError(call: "socket", errno: errno) }
        var address = loopback(port: 0)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(descriptor, 128) == 0 else {
            let error = SocketError(call: bound == 0 ? "listen" : "bind", errno: errno)
            _ = close(descriptor)
            throw error
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) }
        }
        return (descriptor, UInt16(bigEndian: address.sin_port))
    }

    /// A connected, non-blocking socket to 127.0.0.1:`port`, with a small receive buffer so that
    /// a slow reader pushes back on the server quickly.
    static func connect(port: UInt16) throws -> Int32 {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard descriptor >= 0 else { throw SocketError(call: "socket", errno: errno) }
        var small: Int32 = 16 * 1024
        _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var address = loopback(port: port)
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let error = SocketError(call: "connect", errno: errno)
            _ = close(descriptor)
            throw error
        }
        _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
        return descriptor
    }

    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = UInt32(0x7f00_0001).bigEndian
        return address
    }
}

/// Bytes waiting to be written, written from the front.
struct OutputQueue {
    private var bytes: [UInt8] = []
    private var start = 0

    var count: Int { bytes.count - start }

    mutating func append(_ chunk: UnsafeRawBufferPointer) { bytes.append(contentsOf: chunk) }

    /// Writes as much as the socket takes. Returns `false` on an error other than `EAGAIN`.
    mutating func write(to descriptor: Int32) -> Bool {
        while count > 0 {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + start, count) }
            if written > 0 {
                start += written
            } else if errno == EAGAIN {
                break
            } else if errno != EINTR {
                return false
            }
        }
        if start == bytes.count {
            bytes.removeAll(keepingCapacity: true)
            start = 0
        } else if start > 64 * 1024 {
            bytes.removeFirst(start)
            start = 0
        }
        return true
    }
}

// MARK: - The server

/// What the server did, for the report.
struct ServerStats: Sendable {
    var accepted = 0
    var bytesEchoed = 0
    var linesEchoed = 0
    /// Times a connection waited for its socket to take more output (`EAGAIN`).
    var writableWaits = 0
    /// Times a connection stopped reading because its peer was not taking the echo fast enough.
    var readingPaused = 0
}

/// The listening socket and the open connections, pinned to the server's loop thread.
actor EchoServer: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    private let listener: Int32
    private var acceptor: LoopDescriptorSource?
    private var connections: [Int32: Connection] = [:]
    private(set) var stats = ServerStats()

    init(thread: LoopThread, listener: Int32) {
        loopExecutor = thread.executor
        self.listener = listener
    }

    /// Starts accepting. The accept handler is a callout of the loop, on the loop's thread, where
    /// the actor's state may be used synchronously (`assumeIsolated`): no hop, no task.
    func start() throws {
        let acceptor = LoopDescriptorSource(descriptor: listener, events: .readable) { [unowned self] _, _ in
            self.assumeIsolated { $0.acceptAll() }
        }
        try loopExecutor.loop.add(acceptor, forMode: .common)
        self.acceptor = acceptor
    }

    private func acceptAll() {
        while true {
            let descriptor = accept(listener, nil, nil)
            guard descriptor >= 0 else { return }  // EAGAIN: accepted everything pending
            _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) | O_NONBLOCK)
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            // Small on purpose, so that this short exchange on loopback shows backpressure; a real
            // server leaves the kernel's buffer autotuning alone.
            var small: Int32 = 32 * 1024
            _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            let connection = Connection(descriptor: descriptor, server: self)
            do {
                try connection.assumeIsolated { try $0.start() }
                connections[descriptor] = connection
                stats.accepted += 1
            } catch {
                print("echo server: cannot watch a new connection: \(error)")
                _ = close(descriptor)
            }
        }
    }

    /// A connection ended: count its work and let it go. Called from the connection, on the loop.
    func closed(_ descriptor: Int32, adding work: ServerStats) {
        stats.bytesEchoed += work.bytesEchoed
        stats.linesEchoed += work.linesEchoed
        stats.writableWaits += work.writableWaits
        stats.readingPaused += work.readingPaused
        connections[descriptor] = nil
    }

    /// Stops accepting and closes what is left.
    func stop() {
        acceptor?.invalidate()  // first stop watching, then close
        acceptor = nil
        _ = close(listener)
        for connection in connections.values { connection.assumeIsolated { $0.close() } }
    }
}

/// One connection's state, pinned to the server's loop thread like the server.
actor Connection: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    nonisolated let descriptor: Int32
    private unowned let server: EchoServer
    private var source: LoopDescriptorSource?
    private var output = OutputQueue()
    private var interest: LoopDescriptorSource.Events = .readable
    private var peerClosed = false
    private var scratch = [UInt8](repeating: 0, count: 64 * 1024)
    private(set) var bytesEchoed = 0
    private(set) var linesEchoed = 0
    private(set) var writableWaits = 0
    private(set) var readingPaused = 0

    /// Reading stops when this much output is queued, and resumes when it is down to `resume`.
    static let highWater = 256 * 1024
    static let resume = 64 * 1024

    init(descriptor: Int32, server: EchoServer) {
        loopExecutor = server.loopExecutor
        self.descriptor = descriptor
        self.server = server
    }

    func start() throws {
        let source = LoopDescriptorSource(descriptor: descriptor, events: .readable) { [unowned self] _, events in
            self.assumeIsolated { $0.handle(events) }
        }
        try loopExecutor.loop.add(source, forMode: .common)
        self.source = source
    }

    private func handle(_ events: LoopDescriptorSource.Events) {
        if events.contains(.writable) && !output.write(to: descriptor) { return close() }
        if events.contains(.readable) && interest.contains(.readable) { readAvailable() }
        if source != nil { updateInterest() }
    }

    /// Reads until `EAGAIN`, the end of the stream, or the output queue is full.
    private func readAvailable() {
        while output.count < Self.highWater {
            let count = scratch.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
            if count > 0 {
                scratch.withUnsafeBytes { bytes in
                    let chunk = UnsafeRawBufferPointer(rebasing: bytes[..<count])
                    output.append(chunk)
                    linesEchoed += chunk.reduce(0) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 }
                }
                bytesEchoed += count
            } else if count == 0 {
                peerClosed = true
                break
            } else if errno == EAGAIN {
                break
            } else if errno != EINTR {
                return close()
            }
        }
        if !output.write(to: descriptor) { close() }
    }

    /// Waits for `.writable` only while output is queued, and for `.readable` unless the queue is
    /// over its high-water mark (until it drains to `resume`) or the peer has finished sending.
    private func updateInterest() {
        var wanted: LoopDescriptorSource.Events = []
        if output.count > 0 { wanted.insert(.writable) }
        let reading = interest.contains(.readable) ? output.count < Self.highWater : output.count <= Self.resume
        if reading && !peerClosed { wanted.insert(.readable) }
        guard !wanted.isEmpty else { return close() }  // the peer is done and has everything back
        guard wanted != interest else { return }
        if wanted.contains(.writable) && !interest.contains(.writable) { writableWaits += 1 }
        if !wanted.contains(.readable) && interest.contains(.readable) && !peerClosed { readingPaused += 1 }
        do {
            try source?.setEvents(wanted)
            interest = wanted
        } catch {
            print("echo server: \(error)")
            close()
        }
    }

    func close() {
        guard let source else { return }
        source.invalidate()  // stop watching before closing the descriptor
        self.source = nil
        _ = Glibc.close(descriptor)
        let work = ServerStats(
            bytesEchoed: bytesEchoed, linesEchoed: linesEchoed, writableWaits: writableWaits,
            readingPaused: readingPaused)
        let descriptor = descriptor
        server.assumeIsolated { $0.closed(descriptor, adding: work) }
    }
}

// MARK: - The client

/// One client connection on the client's loop thread: sends its lines while reading the echo,
/// checks that the echo is exactly what it sent, and reports when all of it is back.
actor EchoClient: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    private let id: Int
    private let payload: [UInt8]
    private var descriptor: Int32 = -1
    private var source: LoopDescriptorSource?
    private var sent = 0
    private var received = 0
    private var scratch = [UInt8](repeating: 0, count: 8 * 1024)
    private var done: CheckedContinuation<Int, any Error>?

    init(thread: LoopThread, id: Int, lines: Int) {
        loopExecutor = thread.executor
        self.id = id
        var payload: [UInt8] = []
        for line in 0..<lines { payload.append(contentsOf: "client \(id) line \(line)\n".utf8) }
        self.payload = payload
    }

    /// Connects, exchanges everything, and returns the number of lines that came back.
    func run(port: UInt16) async throws -> Int {
        descriptor = try Socket.connect(port: port)
        let source = LoopDescriptorSource(descriptor: descriptor, events: [.readable, .writable]) {
            [unowned self] _, events in
            self.assumeIsolated { $0.handle(events) }
        }
        do {
            try loopExecutor.loop.add(source, forMode: .common)
        } catch {
            closeSocket()
            throw error
        }
        self.source = source
        let bytes = try await withCheckedThrowingContinuation { done = $0 }
        return bytes == payload.count ? payload.reduce(0) { $1 == UInt8(ascii: "\n") ? $0 + 1 : $0 } : 0
    }

    private func handle(_ events: LoopDescriptorSource.Events) {
        if events.contains(.writable) { send() }
        // Reads at most 8 KB per callout: a deliberately slow reader, so the server's queue fills.
        if events.contains(.readable) { receive() }
    }

    private func send() {
        while sent < payload.count {
            let written = payload.withUnsafeBytes {
                Glibc.write(descriptor, $0.baseAddress! + sent, payload.count - sent)
            }
            if written > 0 {
                sent += written
            } else if errno == EAGAIN {
                return
            } else if errno != EINTR {
                return finish(throwing: SocketError(call: "write", errno: errno))
            }
        }
        // All sent: stop asking for .writable, and tell the server no more is coming.
        try? source?.setEvents(.readable)
        shutdown(descriptor, Int32(SHUT_WR))
    }

    private func receive() {
        let count = scratch.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
        if count > 0 {
            guard received + count <= payload.count,
                scratch[..<count].elementsEqual(payload[received..<received + count])
            else {
                return finish(throwing: EchoMismatch(client: id, offset: received))
            }
            received += count
            if received == payload.count { finish(returning: received) }
        } else if count == 0 {
            finish(throwing: EchoMismatch(client: id, offset: received))  // closed before the end
        } else if errno != EAGAIN && errno != EINTR {
            finish(throwing: SocketError(call: "read", errno: errno))
        }
    }

    private func finish(returning bytes: Int) {
        closeSocket()
        done?.resume(returning: bytes)
        done = nil
    }

    private func finish(throwing error: any Error) {
        closeSocket()
        done?.resume(throwing: error)
        done = nil
    }

    private func closeSocket() {
        source?.invalidate()
        source = nil
        if descriptor >= 0 { _ = close(descriptor) }
        descriptor = -1
    }
}

struct EchoMismatch: Error, CustomStringConvertible {
    let client: Int
    let offset: Int
    var description: String { "client \(client): the echo differs from what was sent at byte \(offset)" }
}

// MARK: - Main

@main
struct Main {
    static func main() async throws {
        let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
        let connections = arguments.first ?? 8
        let lines = arguments.dropFirst().first ?? 20_000
        // A peer that closes early must make a write fail with EPIPE, not kill the process.
        signal(SIGPIPE, SIG_IGN)

        let serverThread = try LoopThread(name: "echo-server")
        let clientThread = try LoopThread(name: "echo-clients")
        let (listener, port) = try Socket.listen()
        let server = EchoServer(thread: serverThread, listener: listener)
        try await server.start()
        print("echo server on 127.0.0.1:\(port); \(connections) clients × \(lines) lines")

        let started = ContinuousClock.now
        let exchange = Task {
            try await withThrowingTaskGroup(of: Int.self) { group in
                for id in 0..<connections {
                    group.addTask { try await EchoClient(thread: clientThread, id: id, lines: lines).run(port: port) }
                }
                var total = 0
                for try await echoed in group { total += echoed }
                return total
            }
        }
        // A bound on the whole exchange: the example stops by itself, also when something is wrong.
        let watchdog = Task {
            try await serverThread.loop.sleep(for: .seconds(60))
            exchange.cancel()
            print("error: the exchange did not finish within 60 s")
            exit(1)
        }
        let echoed: Int
        do {
            echoed = try await exchange.value
        } catch {
            print("error: \(error)")
            exit(1)
        }
        watchdog.cancel()
        let elapsed = started.duration(to: .now)

        // The server closes each connection once its client has finished sending and has its echo.
        var report = await server.stats
        var waited = 0
        while report.linesEchoed < echoed && waited < 5_000 {
            try await serverThread.loop.sleep(for: .milliseconds(1))
            waited += 1
            report = await server.stats
        }
        await server.stop()
        await clientThread.shutdown()
        await serverThread.shutdown()

        let expected = connections * lines
        print("\(echoed) of \(expected) lines came back, byte for byte, in \(elapsed)")
        print(
            "server: \(report.accepted) connections, \(report.linesEchoed) lines (\(report.bytesEchoed) bytes) echoed; waited for writable \(report.writableWaits) times, paused reading \(report.readingPaused) times"
        )
        guard echoed == expected, report.linesEchoed == expected, report.accepted == connections else {
            print("error: lines were lost")
            exit(1)
        }
    }
}
