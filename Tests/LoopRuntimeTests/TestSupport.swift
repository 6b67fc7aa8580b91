import Dispatch
import Synchronization
import Testing

@testable import LoopRuntime

#if canImport(Glibc)
    import Glibc
#endif

/// A thread-safe log of events, compared exactly in tests.
final class Trace: Sendable {
    private let events = Locked<[String]>([])

    func append(_ event: String) {
        events.withLock { $0.append(event) }
    }

    var all: [String] { events.withLock { $0 } }

    /// The events joined by spaces: `"E BT BS BW AW X"`.
    var text: String { all.joined(separator: " ") }

    func clear() { events.withLock { $0.removeAll() } }

    func count(of event: String) -> Int { all.filter { $0 == event }.count }
}

/// A thread-safe counter.
final class Counter: Sendable {
    private let value = Atomic<Int>(0)
    @discardableResult
    func increment() -> Int { value.wrappingAdd(1, ordering: .relaxed).newValue }
    var count: Int { value.load(ordering: .relaxed) }
}

/// A loop on the calling thread driven by a manual waiter with virtual time. Torn down when the
/// test ends (see `TestLoops`).
func makeManualLoop() -> (Loop, ManualWaiter) {
    let waiter = ManualWaiter()
    return (TestLoops.register(Loop(waiter: waiter)), waiter)
}

/// A loop on the calling thread with a real epoll waiter, not registered as the thread's loop.
/// Torn down when the test ends (see `TestLoops`).
func makeEpollLoop() throws -> Loop {
    TestLoops.register(Loop(waiter: try EpollWaiter()))
}

/// The loops a test made with `makeManualLoop()` or `makeEpollLoop()`. Such a loop is no thread's
/// loop, so no thread exit tears it down, and a test's items often capture it (a timer that stops
/// its own loop): loop → item → handler → loop, a cycle LeakSanitizer reports. The suites' trait
/// (`.tearsDownTestLoops`, on every suite of this target) tears them down when each test ends, as
/// a thread's exit would.
final class TestLoops: Sendable {
    private let loops = Locked<[Loop]>([])

    @TaskLocal static var current: TestLoops?

    /// Records `loop` for the running test's teardown, if the caller runs inside a test's scope.
    static func register(_ loop: Loop) -> Loop {
        current?.loops.withLock { $0.append(loop) }
        return loop
    }

    fileprivate func tearDownAll() {
        let made = loops.withLock { loops in
            defer { loops.removeAll() }
            return loops
        }
        for loop in made { loop.tearDown() }
    }
}

/// Tears down the loops each test of the suite made (see `TestLoops`).
struct TearsDownTestLoops: SuiteTrait, TestTrait, TestScoping {
    var isRecursive: Bool { true }

    func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard testCase != nil else { return try await function() }  // the suite itself: nothing to add
        let loops = TestLoops()
        defer { loops.tearDownAll() }
        try await TestLoops.$current.withValue(loops) { try await function() }
    }
}

extension Trait where Self == TearsDownTestLoops {
    /// Tears down the loops each test made with `makeManualLoop()` or `makeEpollLoop()`.
    static var tearsDownTestLoops: Self { TearsDownTestLoops() }
}

/// An observer appending the SPEC notation of each activity (`E`, `BT`, …) to `trace`.
func tracing(
    _ trace: Trace, _ activities: Loop.Activity = .allActivities, order: Int = 0, prefix: String = ""
) -> LoopObserver {
    LoopObserver(activities: activities, order: order) { _, activity in
        trace.append(prefix + activity.description)
    }
}

/// A source that is never signalled: it keeps its modes alive (SPEC R10).
func keepAliveSource() -> LoopSource {
    LoopSource {}
}

extension ManualWaiter {
    var virtualNow: ContinuousClock.Instant { LoopTime.instant(now()) }
    var armedDeadline: Int64 { state.withLock { $0.armed } }
    var blockingWaits: Int { state.withLock { $0.blockingWaits } }
    var armCalls: Int { state.withLock { $0.armCalls } }
    var wakeCalls: Int { state.withLock { $0.wakeCalls } }
}

extension Loop {
    /// The loop's clock as an instant (virtual for manual loops).
    var now: ContinuousClock.Instant { LoopTime.instant(waiter.now()) }
}

/// Runs `body` on a new thread and waits for it to end.
func onNewThread(name: String = "test-thread", _ body: @escaping @Sendable () -> Void) throws {
    try PlatformThread.spawn(name: name, body).join()
}

/// Polls `condition` every millisecond until it holds or `timeout` passes; true if it held.
func eventually(timeout: Duration = .seconds(10), _ condition: () -> Bool) -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if condition() { return true }
        usleep(1000)
    }
    return condition()
}

/// What each open descriptor of this process refers to (`/proc/self/fd/N` link targets).
func openDescriptors() -> [Int32: String] {
    var result: [Int32: String] = [:]
    guard let directory = opendir("/proc/self/fd") else { return result }
    let own = dirfd(directory)
    defer { closedir(directory) }
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self)
        }
        guard let fd = Int32(name), fd != own else { continue }
        var buffer = [CChar](repeating: 0, count: 256)
        let length = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
        result[fd] = length > 0 ? String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) : "?"
    }
    return result
}

/// Makes libdispatch open the timer descriptors it creates lazily (one per clock: uptime, wall,
/// monotonic), so that they are not mistaken for a leak by a descriptor check that starts
/// afterwards.
func warmUpDispatchTimers() {
    let done = DispatchSemaphore(value: 0)
    DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(1)) { done.signal() }
    DispatchQueue.global().asyncAfter(wallDeadline: .now() + .milliseconds(1)) { done.signal() }
    // Swift concurrency sleeps on libdispatch's third clock (monotonic / continuous).
    Task.detached {
        try? await Task.sleep(for: .milliseconds(1))
        done.signal()
    }
    done.wait()
    done.wait()
    done.wait()
}

/// The descriptors open now, after warming up libdispatch (see `warmUpDispatchTimers`).
func descriptorBaseline() -> [Int32: String] {
    warmUpDispatchTimers()
    return openDescriptors()
}

/// Traps with the descriptors opened since `before` if there are any (for exit tests).
func requireNoNewDescriptors(since before: [Int32: String]) {
    let after = openDescriptors()
    let opened = after.filter { before[$0.key] != $0.value }
    if !opened.isEmpty {
        if let file = fopen("/tmp/leak-\(getpid()).txt", "w") {
            fputs("opened: \(opened)\nbefore: \(before)\n", file)
            fclose(file)
        }
        fatalError("descriptors leaked: \(opened.sorted { $0.key < $1.key })")
    }
}

/// A pipe for descriptor-source tests; both ends are closed by `close()`.
struct Pipe {
    let reader: Int32
    let writer: Int32

    init() {
        var fds: [Int32] = [0, 0]
        precondition(pipe(&fds) == 0, "pipe failed")
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        reader = fds[0]
        writer = fds[1]
    }

    func write(_ byte: UInt8 = 1) {
        var value = byte
        precondition(Glibc.write(writer, &value, 1) == 1, "pipe write failed")
    }

    /// Reads everything available; returns the number of bytes.
    @discardableResult
    func drain() -> Int { readAll(reader) }

    func close() {
        _ = Glibc.close(reader)
        _ = Glibc.close(writer)
    }
}

/// Reads a non-blocking descriptor until it has nothing more; returns the number of bytes.
@discardableResult
func readAll(_ descriptor: Int32) -> Int {
    var buffer = [UInt8](repeating: 0, count: 65_536)
    var total = 0
    while true {
        let count = read(descriptor, &buffer, buffer.count)
        if count <= 0 { return total }
        total += count
    }
}

/// The names of this process's live threads (`/proc/self/task/*/comm`).
func threadNames() -> [String] {
    guard let directory = opendir("/proc/self/task") else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let task = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
            String(decoding: bytes.prefix { $0 != 0 }, as: UTF8.self)
        }
        guard task.first != "." else { continue }
        let descriptor = open("/proc/self/task/\(task)/comm", O_RDONLY)
        guard descriptor >= 0 else { continue }  // the thread ended meanwhile
        defer { close(descriptor) }
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = read(descriptor, &buffer, buffer.count)
        if count > 0 { names.append(String(decoding: buffer[..<count].filter { $0 != 0x0A }, as: UTF8.self)) }
    }
    return names
}
