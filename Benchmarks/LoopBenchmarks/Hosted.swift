import CBenchmarkSupport
import Foundation
import LoopRuntime

/// Issue #32: a loop run by a host (`HostedLoop`) against the same loop running itself, in one run.
///
/// The host is a plain `poll(2)` loop, as a GLib or game loop would be: it polls the hosted
/// loop's descriptor with the timeout `prepare()` gives (0 when the loop has work), then
/// dispatches. Three figures: a pass that waits for work handed over by another thread (a
/// ping-pong, against the loop's own blocking wait), a pass that does not wait (a block that
/// queues the next one), and an idle hosted loop's CPU time and wake-ups.
enum Hosted {
    final class State: @unchecked Sendable {  // touched by one side at a time, in turn
        var remaining = 0
        var done = false
    }

    /// The host: poll, dispatch, until `state.done`.
    static func host(_ hosted: HostedLoop, until state: State, wakes: inout Int) {
        var fds = [pollfd(fd: hosted.descriptor, events: Int16(POLLIN), revents: 0)]
        while !state.done {
            let timeout = hosted.prepare().timeoutMilliseconds
            fds[0].revents = 0
            _ = poll(&fds, 1, timeout)
            wakes += 1
            hosted.dispatch()
        }
    }

    /// Blocks bounced between this thread's loop and a LoopThread, `roundTrips` times.
    static func pingPong(_ roundTrips: Int, hosted: Bool) {
        let here = Loop.current
        let there = try! LoopThread(name: "bench-echo")
        let state = State()
        state.remaining = roundTrips
        @Sendable func serve() {
            there.loop.perform {
                here.perform {
                    state.remaining -= 1
                    if state.remaining == 0 {
                        state.done = true
                        here.stop()
                    } else {
                        serve()
                    }
                }
            }
        }
        if hosted {
            let session = try! here.beginHosting()
            serve()
            var wakes = 0
            host(session, until: state, wakes: &wakes)
            session.end()
        } else {
            let keepAlive = LoopSource {}
            here.add(keepAlive, forMode: .default)
            serve()
            here.run(.default)
            keepAlive.invalidate()
        }
        there.shutdown()
    }

    /// A block that queues the next one on the same loop, `count` times: passes that never wait.
    static func chain(_ count: Int, hosted: Bool) {
        let here = Loop.current
        let state = State()
        state.remaining = count
        @Sendable func next() {
            here.perform {
                state.remaining -= 1
                if state.remaining == 0 {
                    state.done = true
                    here.stop()
                } else {
                    next()
                }
            }
        }
        next()
        if hosted {
            let session = try! here.beginHosting()
            var wakes = 0
            host(session, until: state, wakes: &wakes)
            session.end()
        } else {
            let keepAlive = LoopSource {}
            here.add(keepAlive, forMode: .default)
            here.run(.default)
            keepAlive.invalidate()
        }
    }

    static func run(_ scale: Scale) {
        let roundTrips = scale.pick(100_000, quick: 2_000)
        let floor = sample(scale) { nanosecondsPerOperation(roundTrips) { RawPingPong.run(roundTrips) } }
        let own = sample(scale) { nanosecondsPerOperation(roundTrips) { pingPong(roundTrips, hosted: false) } }
        let hostedPingPong = sample(scale) {
            nanosecondsPerOperation(roundTrips) { pingPong(roundTrips, hosted: true) }
        }
        Report.add(
            ResultLine(
                scenario: "hosted", metric: "perform ping-pong, hosted by a poll(2) host", unit: "ns/rt",
                ours: hostedPingPong, comparisonName: "the loop running itself", comparison: own,
                higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "hosted", metric: "perform ping-pong, hosted by a poll(2) host", unit: "ns/rt",
                ours: hostedPingPong, comparisonName: "eventfd floor", comparison: floor, higherIsBetter: false))

        let blocks = scale.pick(1_000_000, quick: 10_000)
        let ownChain = sample(scale) { nanosecondsPerOperation(blocks) { chain(blocks, hosted: false) } }
        let hostedChain = sample(scale) { nanosecondsPerOperation(blocks) { chain(blocks, hosted: true) } }
        Report.add(
            ResultLine(
                scenario: "hosted", metric: "a pass that does not wait (block chain), hosted", unit: "ns/pass",
                ours: hostedChain, comparisonName: "the loop running itself", comparison: ownChain,
                higherIsBetter: false))

        // Idle: a hosted loop with nothing to do keeps its host asleep.
        let seconds = scale.quick ? 0.2 : 3.0
        var wakes = 0
        let session = try! Loop.current.beginHosting()
        session.dispatch()  // the run call begins and the loop falls asleep
        let usage = Idle.threadUsage {
            var fds = [pollfd(fd: session.descriptor, events: Int16(POLLIN), revents: 0)]
            let end = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
            while ContinuousClock.now < end {
                let left = ContinuousClock.now.duration(to: end).components
                let budget = Int32(left.seconds * 1000 + left.attoseconds / 1_000_000_000_000_000) + 1
                let limit = session.prepare().timeoutMilliseconds
                if poll(&fds, 1, limit < 0 ? budget : min(limit, budget)) > 0 {
                    wakes += 1
                    session.dispatch()
                }
            }
        }
        session.end()
        Report.add(
            ResultLine(
                scenario: "hosted", metric: "idle \(seconds) s hosted: loop wake-ups", unit: "wakes",
                ours: Stats([Double(wakes)]), comparisonName: nil, comparison: nil, higherIsBetter: false))
        Report.add(
            ResultLine(
                scenario: "hosted", metric: "idle \(seconds) s hosted: CPU time", unit: "µs",
                ours: Stats([usage.cpuMicroseconds]), comparisonName: nil, comparison: nil, higherIsBetter: false))
    }
}
