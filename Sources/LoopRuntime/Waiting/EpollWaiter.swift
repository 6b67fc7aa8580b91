import CLoopRuntimeShims
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The Linux waiter: one epoll instance watching an eventfd (wake-ups), a timerfd (the next
/// deadline, absolute on `CLOCK_BOOTTIME`) and the descriptors of descriptor sources.
///
/// The loop arms the timerfd only when its deadline moves (SPEC M7) and writes the eventfd at most
/// once per idle→busy transition (SPEC M2), so an idle loop makes no system call at all.
final class EpollWaiter: LoopWaiter, @unchecked Sendable {
    // The three descriptors are immutable after init and closed once, under `state`'s lock, which
    // `wake()` and `arm(_:)` also take, so no other thread can write to a closed (and perhaps
    // reused) descriptor number; the armed deadline is an atomic (ArmedDeadline). `events` is only touched
    // by `wait`, on the loop thread.
    private let epollFD: Int32
    private let wakeFD: Int32
    private let timerFD: Int32
    private struct State {
        var closed = false
    }
    private let state = Locked(State())
    private let armed = ArmedDeadline()
    private let events: UnsafeMutablePointer<epoll_event>
    private let eventCapacity: Int32 = 64

    private static let wakeToken: UInt64 = 0
    private static let timerToken: UInt64 = 1

    /// Opens the epoll instance, the eventfd and the timerfd.
    ///
    /// - Throws: ``LoopSystemError`` naming the call that failed (typically `EMFILE`).
    init() throws(LoopSystemError) {
        var opened: [Int32] = []
        do {
            let epollFD = try retryingSyscall("epoll_create1") { cloop_epoll_create() }
            opened.append(epollFD)
            let wakeFD = try retryingSyscall("eventfd") { cloop_eventfd_create() }
            opened.append(wakeFD)
            let timerFD = try retryingSyscall("timerfd_create") { cloop_timerfd_create() }
            opened.append(timerFD)
            _ = try retryingSyscall("epoll_ctl") {
                cloop_epoll_ctl(epollFD, cloop_epoll_ctl_add(), wakeFD, CLOOP_EPOLLIN, Self.wakeToken)
            }
            _ = try retryingSyscall("epoll_ctl") {
                cloop_epoll_ctl(epollFD, cloop_epoll_ctl_add(), timerFD, CLOOP_EPOLLIN, Self.timerToken)
            }
            self.epollFD = epollFD
            self.wakeFD = wakeFD
            self.timerFD = timerFD
            self.events = cloop_epoll_events_alloc(eventCapacity)
        } catch {
            for fd in opened { _ = Glibc.close(fd) }
            throw error
        }
    }

    deinit {
        close()
        cloop_epoll_events_free(events)
    }

    func now() -> Int64 { LoopTime.now() }

    func armedDeadline() -> Int64 { armed.current }

    /// The epoll descriptor itself: it is readable when one of the descriptors it watches is —
    /// the eventfd, the timerfd at the armed deadline, a descriptor source.
    var hostDescriptor: Int32? { epollFD }

    func arm(_ deadline: Int64) {
        // Checked without the lock, which a wake-up from another thread takes (see ArmedDeadline).
        guard armed.needsArming(for: deadline) else { return }
        armed.didArm(deadline)
        state.withLock { state in
            guard !state.closed else { return }
            let value = deadline == LoopTime.distantFuture ? -1 : max(deadline, 1)
            infallibleSyscall("timerfd_settime") { cloop_timerfd_arm(timerFD, value) }
        }
    }

    func wait(blocking: Bool, into result: inout WaitEvents) {
        let count = infallibleSyscall("epoll_wait") {
            cloop_epoll_wait(epollFD, events, eventCapacity, blocking ? -1 : 0)
        }
        for index in 0..<count {
            switch cloop_epoll_event_token(events, index) {
            case Self.wakeToken:
                // Reset the counter so the descriptor stops being readable.
                _ = cloop_eventfd_drain(wakeFD)
            case Self.timerToken:
                // Not read: the next arming sets the timerfd again (whatever the date), which
                // clears it.
                armed.expired()
                result.deadlineExpired = true
            case let token:
                result.ready.append((token, cloop_epoll_event_flags(events, index)))
            }
        }
    }

    func register(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        try control(cloop_epoll_ctl_add(), descriptor, events, token)
    }

    func deregister(_ descriptor: Int32, paused: Bool) throws(LoopSystemError) {
        guard !paused else { return }  // pausing already took it out of the set
        try control(cloop_epoll_ctl_del(), descriptor, 0, 0)
    }

    /// Pausing leaves the epoll set (`EPOLL_CTL_DEL`): a registration with no events would still
    /// report `EPOLLHUP`/`EPOLLERR` (the kernel always adds them) and make the wait spin.
    func pause(_ descriptor: Int32) throws(LoopSystemError) {
        try control(cloop_epoll_ctl_del(), descriptor, 0, 0)
    }

    /// Resuming adds it back (`EPOLL_CTL_ADD`), which fails with `EBADF` for a closed descriptor.
    func resume(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        try control(cloop_epoll_ctl_add(), descriptor, events, token)
    }

    func modify(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        try control(cloop_epoll_ctl_mod(), descriptor, events, token)
    }

    /// `EPOLL_CTL_MOD` with the same events: `EBADF` for a closed descriptor, `ENOENT` when the
    /// number now names a file that is not in the set.
    func checkRegistration(_ descriptor: Int32, events: UInt32, token: UInt64) throws(LoopSystemError) {
        try control(cloop_epoll_ctl_mod(), descriptor, events, token)
    }

    private func control(_ operation: Int32, _ descriptor: Int32, _ events: UInt32, _ token: UInt64)
        throws(LoopSystemError)
    {
        let result: Result<Void, LoopSystemError> = state.withLock { state in
            guard !state.closed else { return .failure(LoopSystemError(call: "epoll_ctl", errno: EBADF)) }
            do throws(LoopSystemError) {
                _ = try retryingSyscall("epoll_ctl") {
                    cloop_epoll_ctl(epollFD, operation, descriptor, events, token)
                }
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    func wake() {
        state.withLock { state in
            guard !state.closed else { return }
            // EAGAIN means the counter is already non-zero: the loop is being woken anyway.
            _ = cloop_eventfd_signal(wakeFD)
        }
    }

    func close() {
        state.withLock { state in
            guard !state.closed else { return }
            state.closed = true
            _ = Glibc.close(timerFD)
            _ = Glibc.close(wakeFD)
            _ = Glibc.close(epollFD)
        }
    }
}
