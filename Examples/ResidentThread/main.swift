// ResidentThread — the classic resident thread: a thread whose loop stays alive on its own port
// and serves requests sent from other threads, then shuts down cleanly.
//
//   swift run ResidentThread

import Dispatch
import LoopRuntime

/// A request for the resident thread, with a reply channel.
struct Request: Sendable {
    let client: Int
    let number: Int
    let reply: @Sendable (String) -> Void
}

// The resident thread owns its loop; an idle port keeps it alive with nothing to do.
let server = try LoopThread(name: "resident")
let served = Counter()
let requests = try LoopPort<Request> { request in
    // Runs on the resident thread, one request at a time, in the order they were sent.
    served.add()
    request.reply("client \(request.client): \(request.number)² = \(request.number * request.number)")
}
try server.loop.add(requests, forMode: .default)

// Three clients on other threads send requests and wait for the replies.
let replies = Counter()
let done = DispatchGroup()
for client in 1...3 {
    DispatchQueue.global().async(group: done) {
        for number in 1...3 {
            let answered = DispatchSemaphore(value: 0)
            try? requests.send(
                Request(client: client, number: number) { text in
                    print("  reply → \(text)")
                    replies.add()
                    answered.signal()
                })
            answered.wait()
        }
    }
}
done.wait()

// Work can also be performed directly, waiting for it to finish (SPEC R76).
try server.perform(waitUntilDone: true) {
    print("  on the resident thread: served \(served.value) requests so far")
}

server.shutdown()
print("served \(served.value) requests, \(replies.value) replies; the thread has ended: \(!server.isOpen)")
do {
    try server.perform {}
} catch {
    print("after shutdown, work is refused: \(error)")
}

/// A counter shared between threads.
final class Counter: @unchecked Sendable {
    private let lock = DispatchSemaphore(value: 1)
    private var count = 0
    func add() {
        lock.wait()
        count += 1
        lock.signal()
    }
    var value: Int {
        lock.wait()
        defer { lock.signal() }
        return count
    }
}
