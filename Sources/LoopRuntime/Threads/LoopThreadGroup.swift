import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A fixed set of ``LoopThread``s handed out round-robin: spread independent work (connections,
/// sessions, pinned actors) over one loop thread per core.
///
/// ```swift
/// let group = try LoopThreadGroup(name: "io")   // one thread per usable processor
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
    ///   - count: How many threads; defaults to ``availableProcessorCount``, the processors this
    ///     process may use (its affinity mask and its cgroup's CPU quota count). Must be ≥ 1.
    ///   - name: The prefix of the threads' names.
    /// - Throws: ``LoopSystemError`` if a thread cannot be started; the ones already started are
    ///   shut down.
    public init(count: Int = LoopThreadGroup.availableProcessorCount, name: String = "LoopThreadGroup")
        throws(LoopSystemError)
    {
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

    /// The number of online processors (at least 1), whatever this process may use of them; a
    /// group's default size is ``availableProcessorCount``.
    ///
    /// - Important: Safe from any thread.
    public static var processorCount: Int { ProcessorBudget.online() }

    /// The number of processors this process can keep busy, at least 1: the online processors,
    /// narrowed by the calling thread's affinity mask (`taskset`, a container's cpuset) and by the
    /// CPU quota of the process's control group or any of its ancestors (cgroup v2 `cpu.max`,
    /// cgroup v1 `cpu.cfs_quota_us` over `cpu.cfs_period_us`), a fractional quota rounded up. In a
    /// container limited to 2 CPUs on a 64-core host this is 2, not 64. It is read from the system
    /// on each call (a few small files), so keep the figure rather than asking in a hot path.
    ///
    /// - Important: Safe from any thread.
    public static var availableProcessorCount: Int { ProcessorBudget.current() }

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
