#if canImport(Glibc)
    import Glibc
#endif

// The callout gate: after `invalidate()` returns, an item's handler is neither running nor about to
// run (on another thread than the one that invalidated it). One rule for the four kinds of item
// whose handlers a loop calls — timers, signalled sources, descriptor sources and observers:
//
// - The loop's thread calls a handler only through `callout(of:_:)`: it publishes the item in
//   `calloutItem`, and only then checks that the item is still valid.
// - `invalidate()` marks the item invalid, detaches it from its loop, and only then looks at
//   `calloutItem` of that loop, waiting while it names the item (`detachInvalidated(from:)`).
//
// Both sides use sequentially consistent operations, so at least one sees the other: either the
// loop sees the item invalid and skips the call, or `invalidate()` sees the call and waits for it
// to return. Invalidating from the loop's own thread (the handler itself, or another callout)
// never waits. A callout that starts a nested run hands the gate to the nested run's callouts
// until they return; waiting for the outer one then ends early — documented at the items'
// `invalidate()`.

/// An item whose handler a loop calls behind the callout gate (see above).
protocol LoopCalloutItem: AnyObject {
    /// The item's validity, read by the gate with sequentially consistent ordering (the item's
    /// `invalidate()` writes it so).
    var isValidForCallout: Bool { get }
    /// Removes the invalidated item from every mode of `loop` (its part of `invalidate()`).
    func leaveModes(of loop: Loop)
}

extension LoopCalloutItem {
    /// The invalidation half of the gate: called by `invalidate()` after it marked the item invalid
    /// (a sequentially consistent store). Detaches it from `loop`, then waits until a callout of
    /// it that the loop's thread had already begun returns (never on the loop's own thread).
    func detachInvalidated(from loop: Loop) {
        leaveModes(of: loop)
        loop.waitForCallout(of: self)
    }
}

/// An item bound to one loop whose handler that loop calls behind the gate: a timer, a descriptor
/// source, an observer (a signalled source may be in several loops and invalidates itself).
protocol LoopBoundCalloutItem: LoopCalloutItem, LoopBoundItem {
    /// Marks the item invalid with a sequentially consistent store (the gate's side of
    /// `invalidate()`). Called once, under the item's stripe lock, while it was valid.
    func clearValidity()
}

extension LoopBoundCalloutItem {
    /// The item's `invalidate()`: marks it invalid under its stripe lock, once, and detaches it from
    /// its loop, waiting for a callout of it under way on another thread (see the gate above).
    func invalidateBoundItem() {
        let loop: Loop? = withBinding { binding, isValid in
            guard isValid else { return nil }
            clearValidity()
            return binding.loop
        }
        loop.map(detachInvalidated(from:))
    }
}

extension Loop {
    /// Calls `handler` as the callout of `item`, unless the item is no longer valid; returns
    /// whether it called it. Loop thread only.
    @inline(__always)
    func callout<Item: LoopCalloutItem>(of item: Item, _ handler: () -> Void) -> Bool {
        let previous = calloutItem.exchange(
            UInt(bitPattern: ObjectIdentifier(item)), ordering: .sequentiallyConsistent)
        let called = item.isValidForCallout
        if called { handler() }
        calloutItem.store(previous, ordering: .releasing)
        return called
    }

    /// Waits until a callout of `item` that the loop's thread had already begun returns. Never
    /// waits on the loop's own thread.
    fileprivate func waitForCallout(of item: AnyObject) {
        let id = UInt(bitPattern: ObjectIdentifier(item))
        guard calloutItem.load(ordering: .sequentiallyConsistent) == id, !owner.isCurrent else { return }
        var rounds = 0
        while calloutItem.load(ordering: .acquiring) == id {
            rounds += 1
            if rounds < 64 { sched_yield() } else { usleep(50) }
        }
    }
}
