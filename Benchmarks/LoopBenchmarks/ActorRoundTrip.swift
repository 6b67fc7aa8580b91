import CBenchmarkSupport
import Dispatch
import Foundation
import LoopExecutor
import LoopRuntime

/// Scenarios 3 and 4, and the executor's enqueue cost.
enum ActorRoundTrip {
    static func run(_ scale: Scale) {
        if let only = getenv("LOOP_BENCH_PINNED_ONLY").map({ String(cString: $0) }) {
            runPinnedOnly(only, scale)  // for profiling one pinned-actor row alone
            return
        }
        let roundTrips = scale.pick(100_000, quick: 2_000)
        let floor = sample(scale) { nanosecondsPerOperation(roundTrips) { RawPingPong.run(roundTrips) } }
        Report.add(
            ResultLine(
                scenario: "actor", metric: "raw eventfd+epoll ping-pong (the floor)", unit: "ns/rt",
                ours: floor, comparisonName: nil, comparison: nil, higherIsBetter: false))

        let thread = try! LoopThread(name: "bench-actor")
        let pinned = Counter(executor: thread.executor)
        let onLoop = sample(scale) {
            nanosecondsPerOperation(roundTrips) { blockingRoundTrips(pinned, roundTrips) }
        }
        Report.add(
            ResultLine(
                scenario: "actor", metric: "global task → loop-pinned actor → back", unit: "ns/rt",
                ours: onLoop, comparisonName: "floor", comparison: floor, higherIsBetter: false))
        let plain = DefaultCounter()
        let defaultActor = sample(scale) {
            nanosecondsPerOperation(roundTrips) { blockingRoundTrips(plain, roundTrips) }
        }
        Report.add(
            ResultLine(
                scenario: "actor", metric: "global task → loop-pinned actor → back", unit: "ns/rt",
                ours: onLoop, comparisonName: "default actor", comparison: defaultActor, higherIsBetter: false))

        // The same round trips to an actor on the reference serial executor (issue #35): a thread,
        // a locked queue and an eventfd, NIO's shape, with none of a loop's features.
        let reference = ReferenceSerialExecutor()
        let onReference = ReferenceCounter(executor: reference)
        let referenceRoundTrip = sample(scale) {
            nanosecondsPerOperation(roundTrips) { blockingRoundTrips(onReference, roundTrips) }
        }
        Report.add(
            ResultLine(
                scenario: "actor", metric: "global task → loop-pinned actor → back", unit: "ns/rt",
                ours: onLoop, comparisonName: "reference serial executor", comparison: referenceRoundTrip,
                higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "actor", metric: "global task → reference-executor actor → back", unit: "ns/rt",
                ours: referenceRoundTrip, comparisonName: "floor", comparison: floor, higherIsBetter: false))

        // Throughput: 4 tasks × N awaits on one loop-pinned actor.
        let perTask = scale.pick(100_000, quick: 2_000)
        let throughput = sample(scale) {
            1e9 / nanosecondsPerOperation(4 * perTask) { blockingParallelCalls(pinned, tasks: 4, perTask: perTask) }
        }
        let defaultThroughput = sample(scale) {
            1e9 / nanosecondsPerOperation(4 * perTask) { blockingParallelCalls(plain, tasks: 4, perTask: perTask) }
        }
        let referenceThroughput = sample(scale) {
            1e9
                / nanosecondsPerOperation(4 * perTask) {
                    blockingParallelCalls(onReference, tasks: 4, perTask: perTask)
                }
        }
        Report.add(
            ResultLine(
                scenario: "actor", metric: "4 tasks × \(perTask) awaits on one actor", unit: "calls/s",
                ours: throughput, comparisonName: "default actor", comparison: defaultThroughput, higherIsBetter: true))
        Report.add(
            ResultLine(
                scenario: "actor", metric: "4 tasks × \(perTask) awaits on one actor", unit: "calls/s",
                ours: throughput, comparisonName: "reference serial executor", comparison: referenceThroughput,
                higherIsBetter: true))
        reference.shutdown()

        // Actor → actor on the same loop: no hop.
        let calls = scale.pick(1_000_000, quick: 10_000)
        let caller = Caller(executor: thread.executor, callee: pinned)
        let sameLoop = sample(scale) {
            nanosecondsPerOperation(calls) { blocking { await caller.callMany(calls) } }
        }
        let plainCaller = DefaultCaller(callee: plain)
        let sameDefault = sample(scale) {
            nanosecondsPerOperation(calls) { blocking { await plainCaller.callMany(calls) } }
        }
        Report.add(
            ResultLine(
                scenario: "actor", metric: "actor → actor call, same loop", unit: "ns",
                ours: sameLoop, comparisonName: "default actor → default actor", comparison: sameDefault,
                higherIsBetter: false))

        // The shape users write: a LoopActor calling another LoopActor on the same loop and
        // touching its own state after each await, so the hop back to the caller is kept (see
        // BENCHMARKS.md on the optimizer); next to the same shape with default actors, and with a
        // hand-written stored `unownedExecutor` (what `LoopActor` should cost no more than).
        let tallier = Tallier(executor: thread.executor, callee: pinned)
        let throughLoopActor = sample(scale) {
            nanosecondsPerOperation(calls) { blocking { await tallier.tally(calls) } }
        }
        let defaultTallier = DefaultTallier(callee: plain)
        let defaultTally = sample(scale) {
            nanosecondsPerOperation(calls) { blocking { await defaultTallier.tally(calls) } }
        }
        let storedTallier = StoredExecutorTallier(
            executor: thread.executor, callee: StoredExecutorCounter(thread.executor))
        let storedTally = sample(scale) {
            nanosecondsPerOperation(calls) { blocking { await storedTallier.tally(calls) } }
        }
        Report.add(
            ResultLine(
                scenario: "actor", metric: "actor → actor call through LoopActor, same loop", unit: "ns",
                ours: throughLoopActor, comparisonName: "default actors", comparison: defaultTally,
                higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "actor", metric: "actor → actor call through LoopActor, same loop", unit: "ns",
                ours: throughLoopActor, comparisonName: "stored unownedExecutor", comparison: storedTally,
                higherIsBetter: false))
        thread.shutdown()

        enqueueCost(scale)
    }

    /// `LOOP_BENCH_PINNED_ONLY=roundtrip` or `=parallel`: that row's loop-pinned half alone, each
    /// sample printed, so that a profiler or `perf stat` sees nothing else.
    static func runPinnedOnly(_ row: String, _ scale: Scale) {
        let thread = try! LoopThread(name: "bench-actor")
        let pinned = Counter(executor: thread.executor)
        let operations = scale.pick(100_000, quick: 2_000)
        for round in 0..<(scale.repetitions + 1) {
            let nanoseconds =
                row == "parallel"
                ? nanosecondsPerOperation(4 * operations) {
                    blockingParallelCalls(pinned, tasks: 4, perTask: operations)
                }
                : nanosecondsPerOperation(operations) { blockingRoundTrips(pinned, operations) }
            print("  \(row) round \(round): \(String(format: "%.0f", nanoseconds)) ns per call")
        }
        thread.shutdown()
    }

    /// The cost of `LoopJobQueue.enqueue` while the loop is awake, and its allocations.
    static func enqueueCost(_ scale: Scale) {
        let loop = Loop.current
        let keepAlive = LoopSource {}
        loop.add(keepAlive, forMode: .default)
        defer { keepAlive.invalidate() }
        // Placeholder jobs that are never run: the queue's runner ignores them.
        let queue = LoopJobQueue(loop: loop, modes: [.common]) { _ in }
        let fake = unsafeBitCast(UnsafeRawPointer(bitPattern: 0x1000)!, to: UnownedJob.self)
        let batch = 1_000
        let batches = scale.pick(1_000, quick: 20)
        var spent = 0.0
        for _ in 0..<3 {  // warm-up: buffers reach their size
            for _ in 0..<batch { queue.enqueue(fake) }
            loop.run(.default, for: .zero)
        }
        let allocationsBefore = cmalloc_counter_allocations()
        for _ in 0..<batches {
            spent += nanosecondsPerOperation(batch) { for _ in 0..<batch { queue.enqueue(fake) } }
            loop.run(.default, for: .zero)
        }
        let allocations = Double(cmalloc_counter_allocations() - allocationsBefore) / Double(batch * batches)
        Report.add(
            ResultLine(
                scenario: "actor", metric: "executor enqueue while the loop is awake", unit: "ns",
                ours: Stats([spent / Double(batches)]), comparisonName: nil, comparison: nil, higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "actor", metric: "allocations per enqueued job (steady state)", unit: "allocs",
                ours: Stats([allocations]), comparisonName: nil, comparison: nil, higherIsBetter: false))
    }
}

protocol Incrementing: Actor {
    func increment(_ value: Int) -> Int
}

actor Counter: LoopActor, Incrementing {
    nonisolated let loopExecutor: LoopExecutor
    private var total = 0
    init(executor: LoopExecutor) { loopExecutor = executor }
    func increment(_ value: Int) -> Int {
        total &+= value
        return total
    }
}

actor DefaultCounter: Incrementing {
    private var total = 0
    func increment(_ value: Int) -> Int {
        total &+= value
        return total
    }
}

actor Caller: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    let callee: Counter
    init(executor: LoopExecutor, callee: Counter) {
        loopExecutor = executor
        self.callee = callee
    }
    func callMany(_ count: Int) async {
        var checksum = 0
        for index in 0..<count { checksum &+= await callee.increment(index) }
        precondition(checksum != 42)
    }
}

/// A `LoopActor` that keeps a running total of what its callee returns: its own state, touched
/// after every await.
actor Tallier: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    let callee: Counter
    private var total = 0
    init(executor: LoopExecutor, callee: Counter) {
        loopExecutor = executor
        self.callee = callee
    }
    func tally(_ count: Int) async {
        for index in 0..<count { total &+= await callee.increment(index) }
        precondition(total != 42)
    }
}

actor DefaultTallier {
    let callee: DefaultCounter
    private var total = 0
    init(callee: DefaultCounter) { self.callee = callee }
    func tally(_ count: Int) async {
        for index in 0..<count { total &+= await callee.increment(index) }
        precondition(total != 42)
    }
}

/// `Tallier` and `Counter` written without `LoopActor`: the unowned executor stored once.
actor StoredExecutorCounter {
    nonisolated let unownedExecutor: UnownedSerialExecutor
    private var total = 0
    init(_ executor: LoopExecutor) { unownedExecutor = executor.asUnownedSerialExecutor() }
    func increment(_ value: Int) -> Int {
        total &+= value
        return total
    }
}

actor StoredExecutorTallier {
    nonisolated let unownedExecutor: UnownedSerialExecutor
    let callee: StoredExecutorCounter
    private var total = 0
    init(executor: LoopExecutor, callee: StoredExecutorCounter) {
        unownedExecutor = executor.asUnownedSerialExecutor()
        self.callee = callee
    }
    func tally(_ count: Int) async {
        for index in 0..<count { total &+= await callee.increment(index) }
        precondition(total != 42)
    }
}

actor DefaultCaller {
    let callee: DefaultCounter
    init(callee: DefaultCounter) { self.callee = callee }
    func callMany(_ count: Int) async {
        var checksum = 0
        for index in 0..<count { checksum &+= await callee.increment(index) }
        precondition(checksum != 42)
    }
}

/// Round trips from a task on the global pool. Between awaits the caller does real work on its
/// own executor (a hash step over the result), so the hop back to the pool really happens.
func blockingRoundTrips(_ actor: some Incrementing, _ count: Int) {
    blocking {
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        for index in 0..<count {
            let value = await actor.increment(index)
            state = (state ^ UInt64(truncatingIfNeeded: value)) &* 0x100_0000_01B3
        }
        precondition(state != 0)
    }
}

func blockingParallelCalls(_ actor: some Incrementing, tasks: Int, perTask: Int) {
    blocking {
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<tasks {
                group.addTask {
                    var state: UInt64 = 1
                    for index in 0..<perTask {
                        state = state &* 31 &+ UInt64(truncatingIfNeeded: await actor.increment(index))
                    }
                    precondition(state != 0)
                }
            }
        }
    }
}

/// Runs `body` in a detached task and waits for it (benchmarks are synchronous).
func blocking(_ body: @escaping @Sendable () async -> Void) {
    let done = DispatchSemaphore(value: 0)
    Task.detached {
        await body()
        done.signal()
    }
    done.wait()
}
