import CLoopRuntimeShims
import Foundation
import Synchronization
import Testing

@testable import LoopRuntime

/// Metrics, stall reports and the timeline, on a manual waiter: virtual time moves only when a
/// callout advances it or a wait jumps to its deadline, so every duration is exact.
@Suite("Instruments: metrics, stalls, trace", .timeLimit(.minutes(3)), .tearsDownTestLoops)
struct InstrumentsTests {
    /// A callout that takes `duration` of virtual time.
    private static func work(_ waiter: ManualWaiter, _ duration: Duration) {
        waiter.advance(by: duration)
    }

    @Test("metrics count passes, callouts per kind, busy and waiting time, timer lateness")
    func metricsCountWhatTheLoopDid() {
        let (loop, waiter) = makeManualLoop()
        loop.startRecordingMetrics()
        let timer = LoopTimer(fireAt: loop.now + .milliseconds(10), label: "tick") { _ in
            Self.work(waiter, .milliseconds(3))
        }
        loop.add(timer, forMode: .default)
        let source = LoopSource(label: "input") { Self.work(waiter, .milliseconds(2)) }
        loop.add(source, forMode: .default)
        source.signal()
        loop.run(.default, for: .seconds(1), returnAfterSourceHandled: false)

        let metrics = loop.metrics
        #expect(metrics.isRecording)
        #expect(metrics[.timer].count == 1)
        #expect(metrics[.timer].max == .milliseconds(3))
        #expect(metrics[.source].count == 1)
        #expect(metrics[.source].total == .milliseconds(2))
        #expect(metrics[.block].count == 0)
        // The source ran at 0–2 ms; the loop then slept until the timer's date (10 ms) and fired it
        // on time; then it slept until the run's deadline.
        #expect(metrics.timerLateness.count == 1)
        #expect(metrics.timerLateness.max == .zero)
        #expect(metrics.busyTime == .milliseconds(5))
        #expect(metrics.waitingTime == .seconds(1) - .milliseconds(5))
        #expect(metrics.wakeUps.timer == 1)
        #expect(metrics.wakeUps.deadline == 1)
        #expect(metrics.wakeUps.total == 2)
        #expect(metrics.passes >= 3)
    }

    @Test("metrics are off by default and stop when stopped")
    func metricsOffRecordNothing() {
        let (loop, waiter) = makeManualLoop()
        let source = LoopSource { Self.work(waiter, .milliseconds(1)) }
        loop.add(source, forMode: .default)
        source.signal()
        loop.run(.default, for: .zero)
        #expect(loop.metrics.passes == 0)
        #expect(!loop.metrics.isRecording)

        loop.startRecordingMetrics()
        source.signal()
        loop.run(.default, for: .zero)
        loop.stopRecordingMetrics()
        source.signal()
        loop.run(.default, for: .zero)
        let metrics = loop.metrics
        #expect(!metrics.isRecording)
        #expect(metrics.passes == 1)
        #expect(metrics[.source].count == 1)
    }

    @Test("wake-ups are counted by cause: timer, descriptor, hand-off, wake-up, deadline")
    func wakeUpsByCause() throws {
        let (loop, waiter) = makeManualLoop()
        loop.add(keepAliveSource(), forMode: .default)
        loop.startRecordingMetrics()
        let step = Atomic<Int>(0)
        waiter.duringWait.withLock {
            $0 = { waiter in
                switch step.wrappingAdd(1, ordering: .relaxed).oldValue {
                case 0: loop.wakeUp()
                case 1: loop.perform {}
                default: break
                }
            }
        }
        loop.run(.default, for: .seconds(1), returnAfterSourceHandled: false)
        let wakeUps = loop.metrics.wakeUps
        #expect(wakeUps.wakeUp == 1)
        #expect(wakeUps.handOff == 1)
        #expect(wakeUps.deadline == 1)

        let pipe = try makePipe()
        defer { closePipe(pipe) }
        let descriptorSource = LoopDescriptorSource(descriptor: pipe.read, events: .readable, label: "pipe") { _, _ in }
        try loop.add(descriptorSource, forMode: .default)
        waiter.duringWait.withLock { $0 = { $0.makeReady(pipe.read, flags: CLOOP_EPOLLIN) } }
        loop.run(.default, for: .seconds(1), returnAfterSourceHandled: true)
        #expect(loop.metrics.wakeUps.descriptor == 1)
        #expect(loop.metrics[.descriptorSource].count == 1)
        descriptorSource.invalidate()
    }

    @Test("a stall names the callout that ran long: its kind, label, mode and depth")
    func stallNamesTheCallout() {
        let (loop, waiter) = makeManualLoop()
        let reports = Locked<[Loop.Stall]>([])
        let token = loop.addStallHandler(longerThan: .milliseconds(20)) { stall in reports.withLock { $0.append(stall) }
        }
        let quick = LoopSource(label: "quick") { Self.work(waiter, .milliseconds(5)) }
        let slow = LoopTimer(fireAt: loop.now, label: "slow") { _ in Self.work(waiter, .milliseconds(30)) }
        loop.add(quick, forMode: .default)
        loop.add(slow, forMode: .default)
        quick.signal()
        loop.perform(label: "block") { Self.work(waiter, .milliseconds(1)) }
        loop.run(.default, for: .zero)

        let stalls = reports.withLock { $0 }
        #expect(stalls.count == 1)
        let stall = stalls.first
        #expect(stall?.scope == .callout)
        #expect(stall?.culprit == .timer)
        #expect(stall?.label.map { "\($0)" } == "slow")
        #expect(stall?.duration == .milliseconds(30))
        #expect(stall?.mode == .default)
        #expect(stall?.depth == 1)
        #expect(stall.map { "\($0)" } == #"timer "slow" ran 30.0 ms in default (depth 1)"#)
        loop.removeStallHandler(token!)
        #expect(loop.instrumentFlags.load(ordering: .relaxed) == 0)
    }

    @Test("a pass of short callouts that adds up to a stall names its longest callout")
    func passStallNamesItsLongestCallout() {
        let (loop, waiter) = makeManualLoop()
        let reports = Locked<[Loop.Stall]>([])
        _ = loop.addStallHandler(longerThan: .milliseconds(25)) { stall in reports.withLock { $0.append(stall) } }
        loop.perform(label: "first") { Self.work(waiter, .milliseconds(10)) }
        loop.perform(label: "second") { Self.work(waiter, .milliseconds(12)) }
        loop.perform(label: "third") { Self.work(waiter, .milliseconds(8)) }
        loop.run(.default, for: .zero)

        let stalls = reports.withLock { $0 }
        #expect(stalls.count == 1)
        #expect(stalls.first?.scope == .pass)
        #expect(stalls.first?.culprit == .block)
        #expect(stalls.first?.label.map { "\($0)" } == "second")
        #expect(stalls.first?.duration == .milliseconds(30))
    }

    @Test("a nested run's waits are not charged to the callout that runs it; its stall is reported once")
    func nestedRunsAreNotStalls() {
        let (loop, waiter) = makeManualLoop()
        let reports = Locked<[Loop.Stall]>([])
        _ = loop.addStallHandler(longerThan: .milliseconds(20)) { stall in reports.withLock { $0.append(stall) } }
        loop.add(keepAliveSource(), forMode: "modal")
        let inner = LoopTimer(fireAt: loop.now + .milliseconds(50), label: "inner") { _ in
            Self.work(waiter, .milliseconds(40))
        }
        loop.add(inner, forMode: "modal")
        let modal = LoopTimer(fireAt: loop.now, label: "modal") { _ in
            // A modal run: 50 ms asleep, then a 40 ms callout, then asleep until its deadline.
            loop.run("modal", for: .milliseconds(200))
        }
        loop.add(modal, forMode: .default)
        loop.run(.default, for: .zero)

        let stalls = reports.withLock { $0 }
        #expect(stalls.count == 1)
        #expect(stalls.first?.label.map { "\($0)" } == "inner")
        #expect(stalls.first?.depth == 2)
        #expect(stalls.first?.mode == "modal")
    }

    @Test("each stall handler hears of the innermost stretch that crossed its own threshold")
    func stallHandlersWithDifferentThresholds() {
        let (loop, waiter) = makeManualLoop()
        let fine = Locked<[String]>([])
        let coarse = Locked<[String]>([])
        _ = loop.addStallHandler(longerThan: .milliseconds(10)) { stall in fine.withLock { $0.append("\(stall)") } }
        _ = loop.addStallHandler(longerThan: .milliseconds(100)) { stall in coarse.withLock { $0.append("\(stall)") } }
        loop.add(keepAliveSource(), forMode: "modal")
        let inner = LoopTimer(fireAt: loop.now, label: "inner") { _ in Self.work(waiter, .milliseconds(20)) }
        loop.add(inner, forMode: "modal")
        let outer = LoopTimer(fireAt: loop.now, label: "outer") { _ in
            Self.work(waiter, .milliseconds(130))
            loop.run("modal", for: .zero)  // the 20 ms inner timer
        }
        loop.add(outer, forMode: .default)
        loop.run(.default, for: .zero)
        #expect(fine.withLock { $0 } == [#"timer "inner" ran 20.0 ms in modal (depth 2)"#])
        #expect(coarse.withLock { $0 } == [#"timer "outer" ran 150.0 ms in default (depth 1)"#])
    }

    @Test("metrics stopped and started again inside a long run call do not count the gap as busy")
    func restartedMetricsSkipTheGap() {
        let (loop, waiter) = makeManualLoop()
        loop.startRecordingMetrics()
        let stop = LoopTimer(fireAt: loop.now + .seconds(1)) { _ in loop.stopRecordingMetrics() }
        let start = LoopTimer(fireAt: loop.now + .seconds(5)) { _ in loop.startRecordingMetrics() }
        let work = LoopTimer(fireAt: loop.now + .seconds(6)) { _ in Self.work(waiter, .milliseconds(7)) }
        for timer in [stop, start, work] { loop.add(timer, forMode: .default) }
        loop.run(.default, for: .seconds(8))
        let busy = loop.metrics.busyTime
        #expect(busy >= .milliseconds(7))
        #expect(busy < .milliseconds(10))
    }

    @Test("the trace's events nest: run ⊃ pass ⊃ wait, callouts; callout ⊃ nested run")
    func traceEventsNest() {
        let (loop, waiter) = makeManualLoop()
        loop.startTracing()
        loop.add(keepAliveSource(), forMode: "modal")
        let modal = LoopTimer(fireAt: loop.now + .milliseconds(5), label: "modal") { _ in
            Self.work(waiter, .milliseconds(1))
            loop.perform(inModes: ["modal"], label: "inside") { Self.work(waiter, .milliseconds(2)) }
            loop.run("modal", for: .milliseconds(10))
        }
        loop.add(modal, forMode: .default)
        loop.run(.default, for: .milliseconds(20))
        loop.stopTracing()

        let events = loop.trace.events
        #expect(loop.trace.dropped == 0)
        #expect(loop.trace.threadID != 0)
        // Any two events are disjoint or one holds the other.
        for (index, a) in events.enumerated() {
            for b in events[(index + 1)...] {
                let (a0, a1) = (a.startNanoseconds, a.startNanoseconds + a.durationNanoseconds)
                let (b0, b1) = (b.startNanoseconds, b.startNanoseconds + b.durationNanoseconds)
                let nested = (a0 <= b0 && b1 <= a1) || (b0 <= a0 && a1 <= b1)
                let disjoint = a1 <= b0 || b1 <= a0
                #expect(nested || disjoint, "\(a) and \(b) overlap")
            }
        }
        func named(_ name: String) -> [Loop.TraceEvent] { events.filter { $0.name == name } }
        func holds(_ outer: Loop.TraceEvent, _ inner: Loop.TraceEvent) -> Bool {
            outer.startNanoseconds <= inner.startNanoseconds
                && inner.startNanoseconds + inner.durationNanoseconds <= outer.startNanoseconds
                    + outer.durationNanoseconds
        }
        let outerRun = named("run default").first
        let nestedRun = named("run modal").first
        let timerCallout = named("modal").first
        let block = named("inside").first
        #expect(outerRun?.depth == 1 && nestedRun?.depth == 2 && block?.depth == 2)
        #expect(timerCallout?.duration == .milliseconds(11))
        if let outerRun, let nestedRun, let timerCallout, let block {
            #expect(holds(outerRun, timerCallout))
            #expect(holds(timerCallout, nestedRun))
            #expect(holds(nestedRun, block))
        }
        // Events are recorded as they end: a stretch after what it holds.
        #expect(events.firstIndex { $0.name == "inside" }! < events.firstIndex { $0.name == "run modal" }!)
        #expect(events.last?.name == "run default")
        #expect(named("wait").contains { if case .wait(let cause) = $0.kind { "\(cause)" == "timer" } else { false } })
    }

    @Test("instruments turned on inside a run call pick it up at its next pass; turned off, they leave nothing behind")
    func instrumentsTurnedOnMidRun() {
        let (loop, waiter) = makeManualLoop()
        let passes = Atomic<Int>(0)
        let counter = LoopObserver(activities: .beforeTimers) { _, _ in
            if passes.wrappingAdd(1, ordering: .relaxed).newValue == 2 { loop.startTracing() }
        }
        loop.add(counter, forMode: .default)
        let ticker = LoopTimer(fireAt: loop.now, interval: .milliseconds(1), label: "tick") { _ in
            Self.work(waiter, .microseconds(10))
        }
        loop.add(ticker, forMode: .default)
        loop.run(.default, for: .milliseconds(5))
        let events = loop.trace.events
        // Passes 2… were recorded (the first callout recorded is pass 2's timer), and the run.
        #expect(events.last?.name == "run default")
        #expect(events.filter { $0.name == "tick" }.count >= 3)
        #expect(events.filter { $0.name == "pass" }.count >= 3)
        let run = events.last!
        #expect(events.allSatisfy { $0.startNanoseconds >= run.startNanoseconds })

        // Turned off inside a run: its record is left behind, and dropped by the next run call.
        let stopper = LoopObserver(activities: .beforeTimers, repeats: false) { _, _ in loop.stopTracing() }
        loop.add(stopper, forMode: .default)
        loop.run(.default, for: .milliseconds(2))
        #expect(loop.instruments.runs.count <= 1)
        loop.startTracing()
        loop.run(.default, for: .milliseconds(2))
        #expect(loop.instruments.runs.count == 0)
        #expect(loop.trace.events.last?.name == "run default")

        // Off inside a run of one mode, on again inside a run of another: the second run's events
        // are its own, not the leftover record's.
        let offAgain = LoopObserver(activities: .beforeTimers, repeats: false) { _, _ in loop.stopTracing() }
        loop.add(offAgain, forMode: .default)
        loop.run(.default, for: .milliseconds(2))
        loop.add(keepAliveSource(), forMode: "other")
        let other = LoopTimer(fireAt: loop.now + .milliseconds(1), label: "other") { _ in loop.startTracing() }
        loop.add(other, forMode: "other")
        let later = LoopTimer(fireAt: loop.now + .milliseconds(2), label: "later") { _ in }
        loop.add(later, forMode: "other")
        let runStart = loop.now
        loop.run("other", for: .milliseconds(3))
        let last = loop.trace.events.last
        #expect(last?.name == "run other")
        #expect(last.map { $0.start >= runStart } == true)
        ticker.invalidate()
    }

    @Test("a full trace ring drops the oldest events and counts them")
    func traceRingDropsTheOldest() {
        let (loop, waiter) = makeManualLoop()
        loop.startTracing(capacity: 4)
        for index in 0..<10 {
            loop.perform(label: "block") { Self.work(waiter, .nanoseconds(index + 1)) }
        }
        loop.run(.default, for: .zero)
        let trace = loop.trace
        // 10 blocks, then the pass, then the run: 12 events, the newest 4 kept.
        #expect(trace.dropped == 8)
        #expect(trace.events.map(\.name) == ["block", "block", "pass", "run default"])
        #expect(trace.events.first?.duration == .nanoseconds(9))
        // Restarting empties the ring.
        loop.startTracing(capacity: 2)
        #expect(loop.trace.events.isEmpty && loop.trace.dropped == 0)
    }

    @Test("the Chrome trace JSON parses, with complete events on the loop's track")
    func chromeTraceJSONParses() throws {
        let (loop, waiter) = makeManualLoop()
        loop.startTracing()
        loop.perform(label: "say \"hi\"\n") { Self.work(waiter, .microseconds(1500)) }
        loop.run(.default, for: .zero)
        let json = Loop.chromeTraceJSON(of: [loop])
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any]
        let events = try #require(object?["traceEvents"] as? [[String: Any]])
        let complete = events.filter { $0["ph"] as? String == "X" }
        #expect(complete.count == 3)
        let block = try #require(complete.first { $0["cat"] as? String == "block" })
        #expect(block["name"] as? String == "say \"hi\"\n")
        #expect(block["dur"] as? Double == 1500)
        #expect((block["args"] as? [String: Any])?["depth"] as? Int == 1)
        #expect(block["tid"] as? Int == Int(loop.trace.threadID))
        let names = events.filter { $0["ph"] as? String == "M" }.compactMap { $0["name"] as? String }
        #expect(names == ["process_name", "thread_name"])
    }

    @Test("labels: every kind of item carries its own; a timer's goes with it")
    func labels() throws {
        let timer = LoopTimer(after: .seconds(1), label: "refresh") { _ in }
        #expect(timer.label.map { "\($0)" } == "refresh")
        #expect(LoopTimer(after: .seconds(1)) { _ in }.label == nil)
        #expect(LoopSource(label: "s") {}.label.map { "\($0)" } == "s")
        #expect(LoopObserver(activities: .entry, label: "o") { _, _ in }.label.map { "\($0)" } == "o")
        let port = try LoopPort<Int>(label: "requests") { _ in }
        #expect(port.source.label.map { "\($0)" } == "requests")
        #expect(
            LoopDescriptorSource(descriptor: 0, events: .readable, label: "stdin") { _, _ in }.label.map { "\($0)" }
                == "stdin")
        // Issue #31, case 13: labels were kept in one process-wide locked table; a timer now keeps
        // its own, and an unlabelled timer stays as small as before (88 bytes: the timer budget).
        let (loop, _) = makeManualLoop()
        loop.add(timer, forMode: .default)
        #expect(timer.label.map { "\($0)" } == "refresh")  // bound: still its own
        let unlabelled = LoopTimer(after: .seconds(1)) { _ in }
        loop.add(unlabelled, forMode: .default)
        for each in [timer, unlabelled] {
            #expect(malloc_usable_size(Unmanaged.passUnretained(each).toOpaque()) <= 88)
        }
        #expect(MemoryLayout<LoopBinding>.size == MemoryLayout<Int>.size)
    }
}

private func makePipe() throws -> (read: Int32, write: Int32) {
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else { throw POSIXError(.EMFILE) }
    return (fds[0], fds[1])
}

private func closePipe(_ pipe: (read: Int32, write: Int32)) {
    close(pipe.read)
    close(pipe.write)
}
