import CBenchmarkSupport
import CLoopRuntimeShims
import CoreFoundation
import Foundation
import LoopRuntime

/// Scenarios 1, 2 and 5: cross-thread wake-ups.
///
/// The floor is a raw ping-pong between two threads, each blocked in `epoll_wait` on its own
/// eventfd; every LoopRuntime figure is a ratio to it, measured in the same run.
enum WakePingPong {
    static func run(_ scale: Scale) {
        let roundTrips = scale.pick(100_000, quick: 2_000)

        let floor = sample(scale) { nanosecondsPerOperation(roundTrips) { RawPingPong.run(roundTrips) } }
        Report.add(
            ResultLine(
                scenario: "wake", metric: "raw eventfd+epoll ping-pong (the floor)", unit: "ns/rt",
                ours: floor, comparisonName: nil, comparison: nil, higherIsBetter: false))

        let blocks = sample(scale) { nanosecondsPerOperation(roundTrips) { LoopBlockPingPong.run(roundTrips) } }
        Report.add(
            ResultLine(
                scenario: "wake", metric: "Loop.perform ping-pong (two sleeping loops)", unit: "ns/rt",
                ours: blocks, comparisonName: "floor", comparison: floor, higherIsBetter: false))

        let ports = sample(scale) { nanosecondsPerOperation(roundTrips) { PortPingPong.run(roundTrips) } }
        Report.add(
            ResultLine(
                scenario: "wake", metric: "LoopPort ping-pong", unit: "ns/rt",
                ours: ports, comparisonName: "floor", comparison: floor, higherIsBetter: false))

        let cf = sample(scale) { nanosecondsPerOperation(roundTrips) { CFPingPong.run(roundTrips) } }
        Report.add(
            ResultLine(
                scenario: "wake", metric: "Loop.perform ping-pong vs CFRunLoopPerformBlock+WakeUp", unit: "ns/rt",
                ours: blocks, comparisonName: "CF", comparison: cf, higherIsBetter: false))

        // Throughput: one sender, blocks to a LoopThread.
        let count = scale.pick(1_000_000, quick: 10_000)
        let thread = try! LoopThread(name: "bench-sink")
        let oursRate = sample(scale) {
            let done = DispatchSemaphore(value: 0)
            let counter = PassCounter()
            let elapsed = nanosecondsPerOperation(count) {
                for _ in 0..<count {
                    try! thread.perform {
                        counter.value += 1
                        if counter.value == count { done.signal() }
                    }
                }
                done.wait()
            }
            return 1e9 / elapsed
        }
        // A LoopThread's submit should cost what the loop's own does (issue #14). Measured on the
        // sender while the loop is busy in a block (so no wake-up and no sleep/wake dynamics).
        let submits = scale.pick(200_000, quick: 2_000)
        func submitCost(_ submit: (@escaping @Sendable () -> Void) -> Void) -> Double {
            let busy = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let done = DispatchSemaphore(value: 0)
            let counter = PassCounter()
            try! thread.perform {
                busy.signal()
                release.wait()
            }
            busy.wait()
            let cost = nanosecondsPerOperation(submits) {
                for _ in 0..<submits {
                    submit {
                        counter.value += 1
                        if counter.value == submits { done.signal() }
                    }
                }
            }
            release.signal()
            done.wait()
            return cost
        }
        let threadSubmit = sample(scale) { submitCost { try! thread.perform($0) } }
        let loopSubmit = sample(scale) { submitCost { _ = thread.loop.perform($0) } }
        thread.shutdown()
        Report.add(
            ResultLine(
                scenario: "wake", metric: "submit to a busy loop: LoopThread.perform", unit: "ns",
                ours: threadSubmit, comparisonName: "Loop.perform", comparison: loopSubmit, higherIsBetter: false))
        let cfRate = sample(scale) { 1e9 / nanosecondsPerOperation(count) { CFPingPong.throughput(count) } }
        Report.add(
            ResultLine(
                scenario: "wake", metric: "\(count) blocks sent to another thread's loop", unit: "blocks/s",
                ours: oursRate, comparisonName: "CFRunLoopPerformBlock", comparison: cfRate, higherIsBetter: true))
        let queue = DispatchQueue(label: "bench-serial")
        let dispatchRate = sample(scale) {
            let done = DispatchSemaphore(value: 0)
            let counter = PassCounter()
            return 1e9
                / nanosecondsPerOperation(count) {
                    for _ in 0..<count {
                        queue.async {
                            counter.value += 1
                            if counter.value == count { done.signal() }
                        }
                    }
                    done.wait()
                }
        }
        Report.add(
            ResultLine(
                scenario: "wake", metric: "\(count) blocks sent to another thread's loop", unit: "blocks/s",
                ours: oursRate, comparisonName: "DispatchQueue.async (serial)", comparison: dispatchRate,
                higherIsBetter: true))
    }
}

/// Two threads bouncing a token through eventfds, each blocked in epoll_wait.
enum RawPingPong {
    final class Side: @unchecked Sendable {
        let epoll = cloop_epoll_create()
        let event = cloop_eventfd_create()
        let ready = cloop_epoll_events_alloc(1)
        init() {
            _ = cloop_epoll_ctl(epoll, cloop_epoll_ctl_add(), event, CLOOP_EPOLLIN, 0)
        }
        func wait() {
            while cloop_epoll_wait(epoll, ready, 1, -1) < 1 {}
            _ = cloop_eventfd_drain(event)
        }
        func signal() {
            _ = cloop_eventfd_signal(event)
        }
        deinit {
            cloop_epoll_events_free(ready)
            close(event)
            close(epoll)
        }
    }

    static func run(_ roundTrips: Int) {
        let a = Side()
        let b = Side()
        let echo = Thread {
            for _ in 0..<roundTrips {
                b.wait()
                a.signal()
            }
        }
        echo.start()
        for _ in 0..<roundTrips {
            b.signal()
            a.wait()
        }
        while !echo.isFinished { usleep(100) }
    }
}

/// A token bounced between the caller's loop and a LoopThread with `perform`.
enum LoopBlockPingPong {
    final class State: @unchecked Sendable {
        var remaining = 0
    }

    static func run(_ roundTrips: Int) {
        let here = Loop.current
        let there = try! LoopThread(name: "bench-echo")
        let state = State()
        state.remaining = roundTrips
        @Sendable func serve() {
            there.loop.perform {
                here.perform {
                    state.remaining -= 1
                    if state.remaining == 0 { here.stop() } else { serve() }
                }
            }
        }
        let keepAlive = LoopSource {}
        here.add(keepAlive, forMode: .default)
        serve()
        here.run(.default)
        keepAlive.invalidate()
        there.shutdown()
    }
}

/// A token bounced between two ports, one on the caller's loop and one on a LoopThread.
enum PortPingPong {
    final class Peer: @unchecked Sendable {
        var port: LoopPort<Int>?
    }

    static func run(_ roundTrips: Int) {
        let here = Loop.current
        let there = try! LoopThread(name: "bench-port")
        let back = Peer()
        let forth = Peer()
        back.port = try! LoopPort<Int> { remaining in
            if remaining == 0 { here.stop() } else { try! forth.port!.send(remaining - 1) }
        }
        forth.port = try! LoopPort<Int> { remaining in try! back.port!.send(remaining) }
        try! here.add(back.port!, forMode: .default)
        try! there.loop.add(forth.port!, forMode: .default)
        try! forth.port!.send(roundTrips - 1)
        here.run(.default)
        back.port!.invalidate()
        forth.port!.invalidate()
        there.shutdown()
    }
}

/// The same ping-pong with CFRunLoopPerformBlock + CFRunLoopWakeUp between two CF loops.
enum CFPingPong {
    final class State: @unchecked Sendable {
        var remaining = 0
        var echoLoop: CFRunLoop?
        var mainLoop: CFRunLoop?
        let ready = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
    }

    static func startEcho(_ state: State) -> CFRunLoopSource {
        var context = CFRunLoopSourceContext()
        context.perform = { _ in }
        let keepAlive = CFRunLoopSourceCreate(nil, 0, &context)!
        Thread {
            state.echoLoop = CFRunLoopGetCurrent()
            CFRunLoopAddSource(state.echoLoop, keepAlive, kCFRunLoopDefaultMode)
            state.ready.signal()
            while CFRunLoopRunInMode(kCFRunLoopDefaultMode, 1e9, false) != .stopped {}
            state.finished.signal()
        }.start()
        state.ready.wait()
        return keepAlive
    }

    static func run(_ roundTrips: Int) {
        let state = State()
        state.remaining = roundTrips
        state.mainLoop = CFRunLoopGetCurrent()
        let keepAlive = startEcho(state)
        var context = CFRunLoopSourceContext()
        context.perform = { _ in }
        let mainKeepAlive = CFRunLoopSourceCreate(nil, 0, &context)!
        CFRunLoopAddSource(state.mainLoop, mainKeepAlive, kCFRunLoopDefaultMode)
        func serve() {
            CFRunLoopPerformBlock(state.echoLoop, kCFRunLoopDefaultMode as CFTypeRef) {
                CFRunLoopPerformBlock(state.mainLoop, kCFRunLoopDefaultMode as CFTypeRef) {
                    state.remaining -= 1
                    if state.remaining == 0 { CFRunLoopStop(state.mainLoop) } else { serve() }
                }
                CFRunLoopWakeUp(state.mainLoop)
            }
            CFRunLoopWakeUp(state.echoLoop)
        }
        serve()
        while CFRunLoopRunInMode(kCFRunLoopDefaultMode, 1e9, false) != .stopped {}
        CFRunLoopSourceInvalidate(mainKeepAlive)
        CFRunLoopStop(state.echoLoop)
        CFRunLoopWakeUp(state.echoLoop)
        state.finished.wait()
        CFRunLoopSourceInvalidate(keepAlive)
    }

    static func throughput(_ count: Int) {
        let state = State()
        let keepAlive = startEcho(state)
        let done = DispatchSemaphore(value: 0)
        var counter = 0
        for _ in 0..<count {
            CFRunLoopPerformBlock(state.echoLoop, kCFRunLoopDefaultMode as CFTypeRef) {
                counter += 1
                if counter == count { done.signal() }
            }
            CFRunLoopWakeUp(state.echoLoop)
        }
        done.wait()
        CFRunLoopStop(state.echoLoop)
        CFRunLoopWakeUp(state.echoLoop)
        state.finished.wait()
        CFRunLoopSourceInvalidate(keepAlive)
    }
}
