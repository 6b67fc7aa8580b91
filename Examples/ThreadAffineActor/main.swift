// ThreadAffineActor — an actor wrapping a thread-affine resource (think: a C library handle that
// must only ever be used from the thread that created it), pinned to a LoopThread and called
// concurrently from many tasks.
//
//   swift run ThreadAffineActor

import LoopExecutor
import LoopRuntime
import Synchronization

/// A stand-in for a thread-affine C handle: it remembers its thread and checks every use.
final class AffineHandle {
    private let owner: Loop
    private(set) var uses = 0

    init() { owner = Loop.current }

    func use() {
        precondition(owner.isCurrentThread, "the handle was used off its thread")
        uses += 1
    }
}

/// The actor owns the handle; pinned to the loop thread, every call runs on that one thread.
actor Device: LoopActor {
    nonisolated let loopExecutor: LoopExecutor
    private var handle: AffineHandle?

    init(thread: LoopThread) {
        loopExecutor = thread.executor
    }

    func open() {
        handle = AffineHandle()  // created on the loop thread
    }

    func read(_ request: Int) -> Int {
        handle!.use()
        return request * 2
    }

    func uses() -> Int { handle!.uses }
}

@main
struct Main {
    static func main() async throws {
        let thread = try LoopThread(name: "device")
        let device = Device(thread: thread)
        await device.open()

        // 8 tasks × 1,000 calls, all at once.
        let total = await withTaskGroup(of: Int.self) { group in
            for client in 0..<8 {
                group.addTask {
                    var sum = 0
                    for request in 0..<1_000 { sum += await device.read(client * 1_000 + request) }
                    return sum
                }
            }
            var total = 0
            for await sum in group { total += sum }
            return total
        }
        let uses = await device.uses()
        print("8 tasks made \(uses) calls; every one ran on the device thread (checked); checksum \(total)")

        // A timer callout of the same loop may touch the actor's state synchronously.
        let fired = AsyncSignal()
        thread.loop.add(
            LoopTimer(after: .milliseconds(10)) { _ in
                let count = device.assumeIsolated { $0.uses() }
                print("timer on the device thread sees \(count) uses via assumeIsolated")
                fired.fire()
            }, forMode: .default)
        await fired.wait()

        await thread.shutdown()  // runs whatever was still queued, then joins
        print("device thread shut down")
    }
}

/// A one-shot signal an async function can wait for.
final class AsyncSignal: Sendable {
    private let flag = Atomic<Bool>(false)
    func fire() { flag.store(true, ordering: .releasing) }
    func wait() async {
        while !flag.load(ordering: .acquiring) { try? await Task.sleep(for: .milliseconds(1)) }
    }
}
