// HostedLoop — the main loop run by another event loop: a plain poll(2) loop that owns the main
// thread, as GLib's does under GTK. The host polls the loop's descriptor next to its own pipe;
// main-loop timers, a DispatchQueue.main block and a @MainActor task all run in the loop's passes,
// and the host's own input is handled in between. Checks what ran and exits 1 if anything is off.
//
//   swift run HostedLoop

import Dispatch
import LoopRuntime
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// What ran, in order (main thread and the helper thread).
let log = Mutex<[String]>([])
func note(_ event: String) {
    print("  " + event)
    log.withLock { $0.append(event) }
}

// The host's own input: a pipe another thread writes to.
var ends: [Int32] = [0, 0]
precondition(pipe(&ends) == 0, "pipe: errno \(errno)")
let (hostInput, hostInputWriter) = (ends[0], ends[1])

let loop = Loop.main
let waits = Atomic<Int>(0)
loop.add(
    LoopObserver(activities: .beforeWaiting) { _, _ in waits.wrappingAdd(1, ordering: .relaxed) },
    forMode: .default)

// Main-loop work: a repeating timer; its third tick asks the host (through its pipe) to quit.
let ticks = Atomic<Int>(0)
loop.add(
    LoopTimer(after: .milliseconds(20), interval: .milliseconds(20)) { timer in
        let tick = ticks.wrappingAdd(1, ordering: .relaxed).newValue
        note("loop timer tick \(tick)")
        if tick == 3 {
            timer.invalidate()
            var byte: UInt8 = 1
            _ = write(hostInputWriter, &byte, 1)
        }
    }, forMode: .default)

// Work handed to the main thread the usual ways, from elsewhere.
DispatchQueue.global().async {
    DispatchQueue.main.async { note("DispatchQueue.main block") }
}
Task { @MainActor in note("@MainActor task") }

print("HostedLoop: a poll(2) host runs the main loop")
let hosted = try loop.beginHosting()
var hostIterations = 0
var quit = false
while !quit {
    let wait = hosted.prepare()
    if wait == .ended { break }
    var fds = [
        pollfd(fd: hosted.descriptor, events: Int16(POLLIN), revents: 0),
        pollfd(fd: hostInput, events: Int16(POLLIN), revents: 0),
    ]
    _ = poll(&fds, nfds_t(fds.count), wait.timeoutMilliseconds)
    hostIterations += 1
    if fds[1].revents != 0 {
        var byte: UInt8 = 0
        _ = read(hostInput, &byte, 1)
        note("host: its own input says quit")
        quit = true
    }
    hosted.dispatch()
}
let leftOver = hosted.end()
close(hostInput)
close(hostInputWriter)

let events = log.withLock { $0 }
print("host iterations: \(hostIterations), loop waits in the host: \(waits.load(ordering: .relaxed))")
let expected = [
    "loop timer tick 1", "loop timer tick 2", "loop timer tick 3", "host: its own input says quit",
]
let ok =
    events.filter { expected.contains($0) } == expected
    && events.contains("DispatchQueue.main block") && events.contains("@MainActor task") && !leftOver
    // Timers 20 ms apart: the host slept between them instead of spinning.
    && hostIterations < 50
print(ok ? "ok" : "FAILED: \(events)")
exit(ok ? 0 : 1)
