#if canImport(Glibc)
    import Glibc
#endif

// The callout gate: after `invalidate()` returns, an item's handler is neither running nor about to
// run (on another thread than the one that invalidated it).
//
// Before it calls a source's, descriptor source's or timer's handler, the loop thread publishes the
// item in `calloutItem` and only then checks that the item is still valid; `invalidate()` marks the
// item invalid and only then looks at `calloutItem` of its loop, waiting while it names the item.
// Both sides use sequentially consistent operations (or the item's lock), so at least one sees the
// other: either the loop sees the item invalid and skips the call, or `invalidate()` sees the call
// and waits for it to return. Invalidating from the loop's own thread (the handler itself, or
// another callout) never waits. A callout that starts a nested run hands the gate to the nested
// run's callouts until they return; waiting for the outer one then ends early — documented at the
// items' `invalidate()`.

extension Loop {
    /// Publishes `item` as the handler about to run and re-checks `isValid`; returns the previous
    /// occupant to give to ``endCallout(restoring:)``, or `nil` (and no callout) if the item is no
    /// longer valid. Loop thread only.
    @inline(__always)
    func beginCallout(_ item: AnyObject, isValid: () -> Bool) -> UInt? {
        let previous = calloutItem.exchange(
            UInt(bitPattern: ObjectIdentifier(item)), ordering: .sequentiallyConsistent)
        if isValid() { return previous }
        calloutItem.store(previous, ordering: .releasing)
        return nil
    }

    /// Ends a callout begun by ``beginCallout(_:isValid:)``. Loop thread only.
    @inline(__always)
    func endCallout(restoring previous: UInt) {
        calloutItem.store(previous, ordering: .releasing)
    }

    /// Called by `invalidate()` after marking `item` invalid: waits until a callout of `item` that
    /// the loop's thread had already begun returns. Never waits on the loop's own thread.
    func waitForCallout(of item: AnyObject) {
        let id = UInt(bitPattern: ObjectIdentifier(item))
        guard calloutItem.load(ordering: .sequentiallyConsistent) == id, !owner.isCurrent else { return }
        var rounds = 0
        while calloutItem.load(ordering: .acquiring) == id {
            rounds += 1
            if rounds < 64 { sched_yield() } else { usleep(50) }
        }
    }
}
