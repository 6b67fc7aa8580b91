import CLoopRuntimeShims

#if canImport(Glibc)
    import Glibc
#endif

/// The descriptor side of the waiters that simulate epoll (``ManualWaiter``, ``VirtualWaiter``):
/// registrations modelled on `epoll_ctl` — pausing leaves the set, resuming adds back, modifying
/// and checking need the descriptor registered — and readiness the test makes. Guarded by its
/// waiter's lock.
struct SimulatedDescriptors {
    /// Watched descriptors: events and token.
    var registered: [Int32: (events: UInt32, token: UInt64)] = [:]
    /// Readiness to report (epoll flags).
    var ready: [Int32: UInt32] = [:]

    mutating func register(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        guard registered[descriptor] == nil else { throw LoopSystemError(call: "epoll_ctl", errno: EEXIST) }
        registered[descriptor] = (events, token)
    }

    mutating func deregister(_ descriptor: Int32) throws(LoopSystemError) {
        guard registered.removeValue(forKey: descriptor) != nil else {
            throw LoopSystemError(call: "epoll_ctl", errno: ENOENT)
        }
    }

    mutating func modify(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        guard registered[descriptor] != nil else { throw LoopSystemError(call: "epoll_ctl", errno: ENOENT) }
        registered[descriptor] = (events, token)
    }

    /// Moves the readiness of watched descriptors into `events`; true if any. With `consuming`,
    /// what was reported is forgotten (an edge); otherwise it stays (level-triggered).
    mutating func collectReady(into events: inout WaitEvents, consuming: Bool) -> Bool {
        guard !ready.isEmpty else { return false }
        var any = false
        for (descriptor, flags) in ready {
            guard let registration = registered[descriptor] else { continue }
            let reported = flags & (registration.events | CLOOP_EPOLLERR | CLOOP_EPOLLHUP)
            guard registration.events != 0, reported != 0 else { continue }
            events.ready.append((registration.token, reported))
            if consuming { ready[descriptor] = flags & ~reported == 0 ? nil : flags & ~reported }
            any = true
        }
        return any
    }
}

/// A waiter whose descriptors are ``SimulatedDescriptors``: the registration calls of
/// ``LoopWaiter``, modelled on epoll.
protocol SimulatedDescriptorWaiter: LoopWaiter {
    /// Runs `body` on the descriptors under the waiter's lock.
    func withDescriptors<R>(
        _ body: (inout SimulatedDescriptors) throws(LoopSystemError) -> R
    ) throws(LoopSystemError) -> R
}

extension SimulatedDescriptorWaiter {
    func register(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        try withDescriptors { (descriptors) throws(LoopSystemError) in
            try descriptors.register(descriptor, events: events, token: token)
        }
    }

    func deregister(_ descriptor: Int32, paused: Bool) throws(LoopSystemError) {
        guard !paused else { return }  // like epoll: pausing already took it out
        try withDescriptors { (descriptors) throws(LoopSystemError) in try descriptors.deregister(descriptor) }
    }

    func pause(_ descriptor: Int32) throws(LoopSystemError) {
        try deregister(descriptor, paused: false)
    }

    func resume(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        try register(descriptor, events: events, token: token)
    }

    func modify(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        try checkRegistration(descriptor, events: events, token: token)
    }

    func checkRegistration(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        try withDescriptors { (descriptors) throws(LoopSystemError) in
            try descriptors.modify(descriptor, events: events, token: token)
        }
    }
}
