import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A fixed set of ``LoopThread``s handed out round-robin: spread independent work (connections,
/// sessions, pinned actors) over one loop thread per core.
///
/// ```swift
/// let group = try LoopThreadGroup(name: "io")   // one thread per core
/// let thread = group.next()
/// try thread.perform { … }
/// group.shutdown()
/// ```
///
/// - Important: Safe from any thread.
public final class LoopThreadGroup: Sendable {
    /// The group's threads, named `"<name>-0"`, `"<name>-1"`, … (in the kernel's 15 bytes a long
    /// name is cut before the index, which stays).
    public let threads: [LoopThread]
    private let cursor = Atomic<Int>(0)

    /// Starts `count` loop threads.
    ///
    /// - Parameters:
    ///   - count: How many threads; defaults to the number of online processors. Must be ≥ 1.
    ///   - name: The prefix of the threads' names.
    /// - Throws: ``LoopSystemError`` if a thread cannot be started; the ones already started are
    ///   shut down.
    public init(count: Int = LoopThreadGroup.processorCount, name: String = "LoopThreadGroup") throws(LoopSystemError) {
        precondition(count >= 1, "LoopThreadGroup: count must be at least 1, got \(count).")
        var threads: [LoopThread] = []
        do {
            for index in 0..<count {
                threads.append(try LoopThread(name: "\(name)-\(index)"))
            }
        } catch {
            threads.forEach { $0.shutdown() }
            throw error
        }
        self.threads = threads
    }

    /// The number of online processors (at least 1).
    public static var processorCount: Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

    /// The next thread, round-robin.
    ///
    /// - Important: Safe from any thread.
    public func next() -> LoopThread {
        let index = cursor.wrappingAdd(1, ordering: .relaxed).oldValue
        return threads[Int(UInt(bitPattern: index) % UInt(threads.count))]
    }

    /// Shuts every thread down (see ``LoopThread/shutdown()``) and waits for them.
    ///
    /// - Important: Safe from any thread but the group's own.
    public func shutdown() {
        for thread in threads { thread.shutdown() }
    }
}
