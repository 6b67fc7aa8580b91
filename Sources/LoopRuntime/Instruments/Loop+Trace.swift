import CLoopRuntimeShims

extension Loop {
    /// One stretch of a loop's life in its timeline: a run call, a pass, a wait, a callout, an
    /// executor's batch of jobs, or a stall. Recorded by ``startTracing(capacity:)`` when the
    /// stretch ends.
    ///
    /// Stretches of one loop nest: a run call holds its passes, a pass its waits, callouts and
    /// batches, a batch its jobs, and a callout the run calls it makes (nested runs). A stall spans
    /// exactly the callout or pass that ran long.
    ///
    /// - Important: A value type; safe from any thread.
    public struct TraceEvent: Sendable, CustomStringConvertible {
        /// What the stretch was.
        public enum Kind: Sendable {
            /// A run call in the mode (SPEC R8).
            case run(Mode)
            /// One pass (SPEC R19).
            case pass
            /// A blocking wait, and what ended it (`timer`, `descriptor`, `hand-off`, `wake-up`,
            /// `deadline`).
            case wait(wokenBy: StaticString)
            /// A callout of user code.
            case callout(CalloutKind)
            /// An executor's batch of `jobs` jobs (SPEC N2); each job is a ``CalloutKind/job``
            /// callout inside it.
            case jobBatch(jobs: Int)
            /// A callout or pass that ran longer than a stall threshold (``Loop/Stall``); the
            /// culprit's kind, if a callout.
            case stall(Stall.Scope, culprit: CalloutKind?)
        }

        /// What the stretch was.
        public let kind: Kind
        /// The label of the callout, batch or stall culprit, if it has one.
        public let label: StaticString?
        /// How many run calls were in progress (1 for an outermost run call and what it holds).
        public let depth: Int
        let startNanoseconds: Int64
        let durationNanoseconds: Int64

        /// When the stretch began, on the loop's clock.
        public var start: ContinuousClock.Instant { LoopTime.instant(startNanoseconds) }
        /// How long it lasted.
        public var duration: Duration { .nanoseconds(durationNanoseconds) }

        /// The event's name in a timeline: `run default`, `pass`, `wait`, the callout's label (or
        /// its kind), `jobs`, `stall`.
        public var name: String {
            switch kind {
            case .run(let mode): "run \(mode.rawValue)"
            case .pass: "pass"
            case .wait: "wait"
            case .callout(let kind): label.map { "\($0)" } ?? "\(kind)"
            case .jobBatch: label.map { "jobs \($0)" } ?? "jobs"
            case .stall: "stall"
            }
        }

        /// `timer "autosave" #1 0.4 ms`.
        public var description: String {
            "\(name) #\(depth) \(Metrics.Distribution.format(duration))"
        }
    }

    /// A loop's recorded timeline: a snapshot taken by ``trace``.
    ///
    /// - Important: A value type; safe from any thread.
    public struct Trace: Sendable {
        /// The loop's description, the name of its track.
        public let loopName: String
        /// The kernel id of the loop's thread (0 if nothing was recorded yet).
        public let threadID: Int32
        /// The events, in the order they ended (a stretch ends after the stretches it holds).
        public let events: [TraceEvent]
        /// Events overwritten because the ring was full (the oldest go first).
        public let dropped: Int

        /// Chrome trace-event JSON for several loops, one track each: opens in Perfetto
        /// (ui.perfetto.dev) and chrome://tracing.
        ///
        /// Every event is a complete event (`"ph": "X"`) with microsecond `ts` and `dur` on the
        /// loops' clock, `pid` the process, `tid` the loop's thread, `cat` its kind (`run`, `pass`,
        /// `wait`, `timer`, `source`, …, `jobs`, `stall`) and `args` with the depth and the rest;
        /// each track is named after its loop (a `thread_name` metadata event, whose `args` also
        /// hold the count of dropped events).
        public static func chromeTraceJSON(_ traces: [Trace]) -> String {
            let pid = cloop_process_id()
            var json = #"{"displayTimeUnit":"ms","traceEvents":["#
            json += #"{"ph":"M","name":"process_name","pid":\#(pid),"tid":0,"args":{"name":"LoopRuntime"}}"#
            for trace in traces where trace.threadID != 0 {
                let tid = trace.threadID
                json += #",{"ph":"M","name":"thread_name","pid":\#(pid),"tid":\#(tid),"args":{"name":"#
                json += jsonString(trace.loopName) + #","dropped":\#(trace.dropped)}}"#
                for event in trace.events {
                    json += #",{"ph":"X","name":"# + jsonString(event.name) + #","cat":""# + event.category
                    json += #"","ts":"# + microseconds(event.startNanoseconds)
                    json += #","dur":"# + microseconds(event.durationNanoseconds)
                    json += #","pid":\#(pid),"tid":\#(tid),"args":{"depth":\#(event.depth)"# + event.arguments + "}}"
                }
            }
            return json + "]}"
        }

        /// ``chromeTraceJSON(_:)`` of this loop alone.
        public var chromeTraceJSON: String { Self.chromeTraceJSON([self]) }
    }

    /// Starts recording this loop's timeline into a ring of `capacity` events, emptied first; when
    /// the ring is full each new event overwrites the oldest (counted in ``Trace/dropped``).
    ///
    /// Recording an event costs a lock and a store on the loop's thread (BENCHMARKS.md,
    /// "Observability"); while tracing is off, one relaxed atomic load per point of the pass where
    /// an event could be recorded.
    ///
    /// - Parameter capacity: The ring's size, in events; must be positive.
    /// - Important: Safe from any thread. Takes effect at the loop's next pass or callout.
    public func startTracing(capacity: Int = 65_536) {
        precondition(capacity > 0, "Loop.startTracing(capacity:): the capacity must be positive, got \(capacity).")
        instruments.traceRing.restart(capacity: capacity)
        turnOnInstrument(InstrumentFlags.tracing)
    }

    /// Stops recording the timeline; ``trace`` keeps what was recorded.
    ///
    /// - Important: Safe from any thread.
    public func stopTracing() {
        turnOffInstrument(InstrumentFlags.tracing)
    }

    /// A snapshot of the recorded timeline, oldest event first.
    ///
    /// - Important: Safe from any thread; reading does not stop the recording.
    public var trace: Trace {
        let (events, dropped, threadID) = instruments.existingTraceRing?.snapshot() ?? ([], 0, 0)
        return Trace(loopName: description, threadID: threadID, events: events, dropped: dropped)
    }

    /// Chrome trace-event JSON of the timelines of `loops`, one track each (see
    /// ``Trace/chromeTraceJSON(_:)``).
    ///
    /// - Important: Safe from any thread.
    public static func chromeTraceJSON(of loops: [Loop]) -> String {
        Trace.chromeTraceJSON(loops.map(\.trace))
    }
}

extension Loop.TraceEvent {
    var category: String {
        switch kind {
        case .run: "run"
        case .pass: "pass"
        case .wait: "wait"
        case .callout(let kind): "\(kind)"
        case .jobBatch: "jobs"
        case .stall: "stall"
        }
    }

    /// The JSON members after `depth` in `args`, each with a leading comma.
    var arguments: String {
        var members = ""
        if let label { members += #","label":"# + jsonString("\(label)") }
        switch kind {
        case .run(let mode): members += #","mode":"# + jsonString(mode.rawValue)
        case .wait(let cause): members += #","wokenBy":""# + "\(cause)" + #"""#
        case .callout(let kind): members += #","kind":""# + "\(kind)" + #"""#
        case .jobBatch(let jobs): members += #","jobs":\#(jobs)"#
        case .stall(let scope, let culprit):
            members += #","scope":""# + "\(scope)" + #"""#
            if let culprit { members += #","culprit":""# + "\(culprit)" + #"""# }
        case .pass: break
        }
        return members
    }
}

/// Nanoseconds as decimal microseconds (`12.345`): Chrome's `ts` and `dur`, to the nanosecond.
private func microseconds(_ nanoseconds: Int64) -> String {
    let value = max(nanoseconds, 0)
    let fraction = String(value % 1000)
    return "\(value / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
}

/// `text` as a JSON string literal.
func jsonString(_ text: String) -> String {
    var escaped = "\""
    for scalar in text.unicodeScalars {
        switch scalar {
        case "\"": escaped += "\\\""
        case "\\": escaped += "\\\\"
        case "\n": escaped += "\\n"
        case "\t": escaped += "\\t"
        case "\r": escaped += "\\r"
        default:
            if scalar.value < 0x20 {
                let hex = String(scalar.value, radix: 16)
                escaped += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
    }
    return escaped + "\""
}

/// A trace event as the ring keeps it: plain data (no reference counting when recorded), turned
/// into a `Loop.TraceEvent` by a snapshot.
struct RawTraceEvent {
    enum Kind: UInt8 {
        case run, pass, wait, callout, jobBatch, stall
    }

    static let none = UInt8.max

    var kind: Kind
    /// A wait's cause (`MetricsStorage.WakeCause`), a callout's kind, a stall's scope (0: callout).
    var detail: UInt8
    /// A stall's culprit kind, or `none`.
    var culprit: UInt8
    var depth: Int32
    /// A batch's job count.
    var count: Int32
    var start: Int64
    var duration: Int64
    var label: StaticString?
    /// A run call's mode; unretained (a loop's modes live as long as the loop, and so does its ring).
    var mode: Unmanaged<ModeState>?

    var event: Loop.TraceEvent {
        let kind: Loop.TraceEvent.Kind
        switch self.kind {
        case .run: kind = .run(mode?._withUnsafeGuaranteedRef { $0.mode } ?? .default)
        case .pass: kind = .pass
        case .wait: kind = .wait(wokenBy: (MetricsStorage.WakeCause(rawValue: Int(detail)) ?? .handOff).name)
        case .callout: kind = .callout(Loop.CalloutKind(rawValue: Int(detail)) ?? .block)
        case .jobBatch: kind = .jobBatch(jobs: Int(count))
        case .stall:
            kind = .stall(detail == 0 ? .callout : .pass, culprit: Loop.CalloutKind(rawValue: Int(culprit)))
        }
        return Loop.TraceEvent(
            kind: kind, label: label, depth: Int(depth), startNanoseconds: start, durationNanoseconds: duration)
    }
}

/// A loop's trace events: a bounded ring of plain records, written by the loop's thread under a
/// lock the snapshots take too. Its memory grows with the events recorded, up to the capacity
/// asked for (a capacity of `Int.max` means "keep everything", not an allocation of that size).
final class TraceRing: Sendable {
    private struct Ring {
        var events: [RawTraceEvent] = []
        var capacity = 1
        /// The slot of the oldest event once the ring is full.
        var head = 0
        var dropped = 0
        var threadID: Int32 = 0

        @inline(__always)
        mutating func append(_ event: RawTraceEvent) {
            if events.count < capacity {
                events.append(event)
            } else {
                events[head] = event
                head = head + 1 == capacity ? 0 : head + 1
                dropped += 1
            }
        }
    }

    private let ring = Locked(Ring())

    func restart(capacity: Int) {
        var fresh = Ring()
        fresh.capacity = capacity
        fresh.events.reserveCapacity(min(capacity, 1_024))
        let old: Ring = ring.withLock { ring in
            defer {
                fresh.threadID = ring.threadID  // the thread stays the same
                ring = fresh
            }
            return ring
        }
        _ = old  // its buffer is freed here, after unlocking
    }

    /// Records `event` (loop thread only; `threadID` is the thread's kernel id).
    @inline(__always)
    func record(_ event: RawTraceEvent, threadID: Int32) {
        ring.withLock { ring in
            ring.threadID = threadID
            ring.append(event)
        }
    }

    func snapshot() -> ([Loop.TraceEvent], dropped: Int, threadID: Int32) {
        let (raw, dropped, threadID): ([RawTraceEvent], Int, Int32) = ring.withLock { ring in
            let raw = Array(ring.events[ring.head...] + ring.events[..<ring.head])
            return (raw, ring.dropped, ring.threadID)
        }
        return (raw.map(\.event), dropped, threadID)
    }
}
