import Synchronization

extension Loop {
    /// A kind of callout: the user code a loop calls.
    ///
    /// - Important: A value type; safe from any thread.
    public enum CalloutKind: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
        /// A ``LoopSource``'s perform handler.
        case source
        /// A ``LoopDescriptorSource``'s handler.
        case descriptorSource
        /// A ``LoopTimer``'s handler (also ``Loop/perform(after:inModes:label:_:)``).
        case timer
        /// A ``LoopObserver``'s handler. The package's own bookkeeping observers (the activity
        /// streams', a `LoopThread`'s mode driver) are not counted.
        case observer
        /// A block queued with ``Loop/perform(inModes:label:_:)``.
        case block
        /// One job of an executor (a slice of a task or of an actor's work).
        case job

        /// `source`, `descriptor source`, `timer`, `observer`, `block` or `job`.
        public var description: String {
            switch self {
            case .source: "source"
            case .descriptorSource: "descriptor source"
            case .timer: "timer"
            case .observer: "observer"
            case .block: "block"
            case .job: "job"
            }
        }
    }

    /// What a loop has done since ``startRecordingMetrics()``: a snapshot taken by ``metrics``.
    ///
    /// Times are on the loop's clock (``Loop/now``). Each figure is read on its own, so a snapshot
    /// taken while the loop works may be a callout apart between two figures; a snapshot of an
    /// idle loop is exact.
    ///
    /// - Important: A value type; safe from any thread.
    public struct Metrics: Sendable, Hashable, CustomStringConvertible {
        /// True while the loop records (between ``Loop/startRecordingMetrics()`` and
        /// ``Loop/stopRecordingMetrics()``).
        public var isRecording: Bool
        /// Passes made (SPEC R19: one per trip through the pass's steps).
        public var passes: Int
        /// Why the loop's blocking waits ended.
        public var wakeUps: WakeUps
        /// Time spent in run calls, not waiting: running callouts and the loop's own work, as far
        /// as the loop's clock readings (after waits and callouts) see it — a pass with nothing to
        /// do adds next to nothing. Counted at the end of each pass and before each wait.
        public var busyTime: Duration
        /// Time spent blocked in the wait.
        public var waitingTime: Duration
        /// Callout durations, per kind. A callout that runs a nested run counts only its own work,
        /// not the nested run's waits.
        public var callouts: [CalloutKind: Distribution]
        /// How long executor jobs waited between their enqueue and the start of their run.
        public var jobLatency: Distribution
        /// How late timers fired: from their fire date to the start of their callout.
        public var timerLateness: Distribution

        /// The durations of `kind`'s callouts (empty if none ran).
        public subscript(kind: CalloutKind) -> Distribution {
            callouts[kind] ?? Distribution()
        }

        /// A few lines: passes, wake-ups, busy and waiting time, then one line per callout kind
        /// that ran, job latency and timer lateness.
        public var description: String {
            var lines = [
                "passes: \(passes), busy: \(Distribution.format(busyTime)), waiting: \(Distribution.format(waitingTime))",
                "wake-ups: \(wakeUps)",
            ]
            for kind in CalloutKind.allCases {
                if let distribution = callouts[kind], distribution.count > 0 {
                    lines.append("\(kind): \(distribution)")
                }
            }
            if jobLatency.count > 0 { lines.append("job latency: \(jobLatency)") }
            if timerLateness.count > 0 { lines.append("timer lateness: \(timerLateness)") }
            return lines.joined(separator: "\n")
        }

        /// Why blocking waits ended, counted per cause. A wait that ended for two reasons at once
        /// counts once, under the first of: wake-up, hand-off, descriptor, then deadline or timer
        /// (the run call's deadline when it has passed, a timer's otherwise).
        ///
        /// - Important: A value type; safe from any thread.
        public struct WakeUps: Sendable, Hashable, CustomStringConvertible {
            /// A timer of the mode came due.
            public var timer: Int
            /// A descriptor source of the mode became ready.
            public var descriptor: Int
            /// Another thread handed the loop work: a block, an executor job, a signalled source,
            /// a port message, a timer change.
            public var handOff: Int
            /// ``Loop/wakeUp()`` was called — or another thread removed the last item of the mode
            /// the loop sleeps in, which wakes it the same way so that its run call can finish.
            public var wakeUp: Int
            /// The run call's own deadline came.
            public var deadline: Int

            /// All of them.
            public var total: Int { timer + descriptor + handOff + wakeUp + deadline }

            /// `timer 3, descriptor 0, hand-off 12, wake-up 1, deadline 0`.
            public var description: String {
                "timer \(timer), descriptor \(descriptor), hand-off \(handOff), wake-up \(wakeUp), deadline \(deadline)"
            }
        }

        /// A distribution of durations in a compact histogram: exact below 16 ns, then eight
        /// buckets per power of two, so a percentile is within 1/16 of the true value.
        ///
        /// - Important: A value type; safe from any thread.
        public struct Distribution: Sendable, Hashable, CustomStringConvertible {
            /// How many durations were recorded.
            public internal(set) var count: Int
            /// Their sum.
            public internal(set) var total: Duration
            /// The longest one.
            public internal(set) var max: Duration
            /// The non-empty buckets, by increasing bucket index.
            var buckets: [Bucket]

            struct Bucket: Sendable, Hashable {
                let index: Int
                let count: Int
            }

            /// An empty distribution.
            public init() {
                count = 0
                total = .zero
                max = .zero
                buckets = []
            }

            init(count: Int, total: Int64, max: Int64, buckets: [Bucket]) {
                self.count = count
                self.total = .nanoseconds(total)
                self.max = .nanoseconds(max)
                self.buckets = buckets
            }

            /// The duration that `fraction` of the recorded ones do not exceed (`0.5`: the median,
            /// `0.99`: the 99th percentile), to within 1/16; `.zero` if none was recorded.
            public func percentile(_ fraction: Double) -> Duration {
                guard count > 0 else { return .zero }
                let clamped = fraction.isNaN ? 0.5 : Swift.min(Swift.max(fraction, 0), 1)
                let rank = Swift.max(1, Int((clamped * Double(count)).rounded(.up)))
                var seen = 0
                for bucket in buckets {
                    seen += bucket.count
                    if seen >= rank {
                        let (lower, width) = Histogram.range(of: bucket.index)
                        return Swift.min(.nanoseconds(lower + width / 2), max)
                    }
                }
                return max
            }

            /// The median.
            public var p50: Duration { percentile(0.5) }
            /// The 99th percentile.
            public var p99: Duration { percentile(0.99) }
            /// The mean.
            public var mean: Duration { count == 0 ? .zero : total / count }

            /// `n 120, p50 1.2 µs, p99 40 µs, max 52 ms`.
            public var description: String {
                "n \(count), p50 \(Self.format(p50)), p99 \(Self.format(p99)), max \(Self.format(max))"
            }

            static func format(_ duration: Duration) -> String {
                let nanoseconds = LoopTime.nanoseconds(of: duration)
                if nanoseconds < 1_000 { return "\(nanoseconds) ns" }
                // The unit is picked after rounding to tenths: 999,950 ns is "1.0 ms".
                if nanoseconds < 999_950 { return "\(tenths(nanoseconds, 100)) µs" }
                if nanoseconds < 999_950_000 { return "\(tenths(nanoseconds, 100_000)) ms" }
                return "\(tenths(nanoseconds, 100_000_000)) s"
            }

            private static func tenths(_ value: Int64, _ unit: Int64) -> String {
                let tenths = (value + unit / 2) / unit
                return "\(tenths / 10).\(tenths % 10)"
            }
        }
    }

    /// Starts recording ``metrics``, from zero the first time; counting resumes where it stopped
    /// after ``stopRecordingMetrics()``.
    ///
    /// While metrics are off (the default), each point of the pass where they would be recorded
    /// costs one relaxed atomic load. While on, the loop reads its clock once more after each
    /// callout and before each executor batch (BENCHMARKS.md, "Observability").
    ///
    /// - Important: Safe from any thread. Takes effect at the loop's next pass or callout.
    public func startRecordingMetrics() {
        _ = instruments.metricsStorage
        setMetricsFlag(true)
    }

    /// Sets the metrics flag and its mirrors in the executor queues (under the lock, so that a
    /// queue registered meanwhile copies the new value).
    private func setMetricsFlag(_ on: Bool) {
        lock.withLock {
            if on { turnOnInstrument(InstrumentFlags.metrics) } else { turnOffInstrument(InstrumentFlags.metrics) }
            for queue in state.jobQueues { queue.timesJobs.store(on, ordering: .relaxed) }
        }
    }

    /// Stops recording metrics; ``metrics`` keeps what was recorded.
    ///
    /// - Important: Safe from any thread.
    public func stopRecordingMetrics() {
        setMetricsFlag(false)
    }

    /// A snapshot of what the loop recorded (all zero if ``startRecordingMetrics()`` was never
    /// called).
    ///
    /// - Important: Safe from any thread; reading does not stop or slow the loop.
    public var metrics: Metrics {
        let recording = instrumentFlags.load(ordering: .acquiring) & InstrumentFlags.metrics != 0
        guard let storage = instruments.existingMetricsStorage else {
            return Metrics(
                isRecording: recording, passes: 0,
                wakeUps: .init(timer: 0, descriptor: 0, handOff: 0, wakeUp: 0, deadline: 0), busyTime: .zero,
                waitingTime: .zero, callouts: [:], jobLatency: .init(), timerLateness: .init())
        }
        return storage.snapshot(isRecording: recording)
    }
}

/// Which instruments a loop has on (`Loop.instrumentFlags`).
enum InstrumentFlags {
    static let metrics: UInt8 = 1
    static let tracing: UInt8 = 2
    static let stalls: UInt8 = 4
}

/// Counters that one thread writes and any thread reads: relaxed atomics, incremented by a load
/// and a store (no read-modify-write: the loop's thread is the only writer).
final class SingleWriterCounters: Sendable {
    // Each slot is an atomic; the pointer is immutable and freed only in deinit.
    nonisolated(unsafe) private let slots: UnsafeMutablePointer<Atomic<Int64>>
    let count: Int

    init(count: Int) {
        self.count = count
        slots = .allocate(capacity: count)
        for index in 0..<count { (slots + index).initialize(to: Atomic(0)) }
    }

    deinit {
        slots.deinitialize(count: count)
        slots.deallocate()
    }

    /// Adds `amount` to slot `index`. Writer thread only.
    @inline(__always)
    func add(_ amount: Int64, at index: Int) {
        let slot = slots + index
        slot.pointee.store(slot.pointee.load(ordering: .relaxed) &+ amount, ordering: .relaxed)
    }

    /// Raises slot `index` to `value` if it is lower. Writer thread only.
    @inline(__always)
    func raise(_ value: Int64, at index: Int) {
        let slot = slots + index
        if slot.pointee.load(ordering: .relaxed) < value { slot.pointee.store(value, ordering: .relaxed) }
    }

    @inline(__always)
    subscript(index: Int) -> Int64 {
        (slots + index).pointee.load(ordering: .relaxed)
    }
}

/// A histogram of durations in nanoseconds: values below 16 exactly, then 8 buckets per power of
/// two up to 2⁶³ (488 buckets), plus the sum and the maximum (the count is the buckets' sum).
final class Histogram: Sendable {
    static let bucketCount = 488
    private static let totalSlot = bucketCount
    private static let maxSlot = bucketCount + 1
    private let counters = SingleWriterCounters(count: bucketCount + 2)

    /// The bucket of `nanoseconds` (negative values count as 0).
    @inline(__always)
    static func bucket(of nanoseconds: Int64) -> Int {
        guard nanoseconds >= 16 else { return Int(max(nanoseconds, 0)) }
        let exponent = 63 - nanoseconds.leadingZeroBitCount  // ≥ 4
        let sub = Int(nanoseconds >> (exponent - 3)) & 7
        return 16 + (exponent - 4) * 8 + sub
    }

    /// The smallest value of bucket `index` and the bucket's width.
    static func range(of index: Int) -> (lower: Int64, width: Int64) {
        guard index >= 16 else { return (Int64(index), 1) }
        let exponent = 4 + (index - 16) / 8
        let sub = Int64((index - 16) % 8)
        return ((8 + sub) << (exponent - 3), 1 << (exponent - 3))
    }

    /// Records one value. Writer thread only.
    @inline(__always)
    func record(_ nanoseconds: Int64) {
        let value = max(nanoseconds, 0)
        counters.add(1, at: Self.bucket(of: value))
        counters.add(value, at: Self.totalSlot)
        counters.raise(value, at: Self.maxSlot)
    }

    func snapshot() -> Loop.Metrics.Distribution {
        var buckets: [Loop.Metrics.Distribution.Bucket] = []
        var counted = 0
        for index in 0..<Self.bucketCount {
            let count = counters[index]
            if count > 0 {
                buckets.append(.init(index: index, count: Int(count)))
                counted += Int(count)
            }
        }
        return Loop.Metrics.Distribution(
            count: counted, total: counters[Self.totalSlot], max: counters[Self.maxSlot], buckets: buckets)
    }
}

/// The recorded metrics of one loop. Written by the loop's thread only; read by any thread.
final class MetricsStorage: Sendable {
    enum Slot: Int, CaseIterable {
        case passes, busy, waiting
        case wakeByTimer, wakeByDescriptor, wakeByHandOff, wakeByWakeUp, wakeByDeadline
    }

    enum WakeCause: Int {
        case timer, descriptor, handOff, wakeUp, deadline

        var slot: Slot {
            switch self {
            case .timer: .wakeByTimer
            case .descriptor: .wakeByDescriptor
            case .handOff: .wakeByHandOff
            case .wakeUp: .wakeByWakeUp
            case .deadline: .wakeByDeadline
            }
        }

        var name: StaticString {
            switch self {
            case .timer: "timer"
            case .descriptor: "descriptor"
            case .handOff: "hand-off"
            case .wakeUp: "wake-up"
            case .deadline: "deadline"
            }
        }
    }

    private let counters = SingleWriterCounters(count: Slot.allCases.count)
    let callouts: [Histogram] = Loop.CalloutKind.allCases.map { _ in Histogram() }
    let jobLatency = Histogram()
    let timerLateness = Histogram()

    @inline(__always)
    func add(_ amount: Int64, to slot: Slot) {
        counters.add(amount, at: slot.rawValue)
    }

    func snapshot(isRecording: Bool) -> Loop.Metrics {
        func count(_ slot: Slot) -> Int { Int(counters[slot.rawValue]) }
        var callouts: [Loop.CalloutKind: Loop.Metrics.Distribution] = [:]
        for kind in Loop.CalloutKind.allCases {
            let distribution = self.callouts[kind.rawValue].snapshot()
            if distribution.count > 0 { callouts[kind] = distribution }
        }
        return Loop.Metrics(
            isRecording: isRecording, passes: count(.passes),
            wakeUps: .init(
                timer: count(.wakeByTimer), descriptor: count(.wakeByDescriptor), handOff: count(.wakeByHandOff),
                wakeUp: count(.wakeByWakeUp), deadline: count(.wakeByDeadline)),
            busyTime: .nanoseconds(counters[Slot.busy.rawValue]),
            waitingTime: .nanoseconds(counters[Slot.waiting.rawValue]), callouts: callouts,
            jobLatency: jobLatency.snapshot(), timerLateness: timerLateness.snapshot())
    }
}
