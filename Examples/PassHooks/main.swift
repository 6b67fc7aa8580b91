// PassHooks — "first" and "last" hooks around every pass, with observers at the extremes of
// `order`: the pattern Apple's main run loop uses to push an autorelease pool when it wakes and
// drain it before it sleeps. Here the "pool" collects per-pass garbage and frees it in one go.
//
//   swift run PassHooks

import LoopRuntime
import Synchronization

/// Objects created during a pass, released together at its end.
final class Pool: Sendable {
    private let objects = Mutex<[String]>([])
    func add(_ object: String) { objects.withLock { $0.append(object) } }
    func drain() -> [String] {
        objects.withLock { objects in
            let drained = objects
            objects.removeAll()
            return drained
        }
    }
}

let loop = Loop.current
let pool = Pool()

// First: order Int.min — runs before every other observer of the same activity.
loop.add(
    LoopObserver(activities: [.entry, .afterWaiting], order: .min) { _, activity in
        print("  [first] \(activity): a fresh pool")
    }, forMode: .common)

// Last: order Int.max — runs after every other observer, right before the loop sleeps or exits.
loop.add(
    LoopObserver(activities: [.beforeWaiting, .exit], order: .max) { _, activity in
        let freed = pool.drain()
        print("  [last]  \(activity): drained the pool (\(freed.count) objects: \(freed.joined(separator: ", ")))")
    }, forMode: .common)

// An ordinary observer in between (order 0).
loop.add(
    LoopObserver(activities: .beforeWaiting) { _, _ in
        pool.add("observer-temp")
    }, forMode: .common)

// Work that allocates during the passes.
for index in 1...2 {
    loop.add(
        LoopTimer(after: .milliseconds(10 * index)) { _ in
            pool.add("timer\(index)-buffer")
            print("  timer \(index) fired")
        }, forMode: .default)
}
loop.perform { pool.add("block-temp") }

print("run(.default) → \(loop.run(.default, for: .milliseconds(100)))")
