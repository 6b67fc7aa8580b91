import Synchronization

/// A source that any thread signals and a loop performs on its thread: CFRunLoop's "version 0"
/// source (SPEC F).
///
/// Signalling marks the source; the next pass of a loop running one of its modes performs it
/// (step 4 of SPEC R19), and a sleeping loop is woken for it (SPEC M2). Signals coalesce: signalling
/// again before the perform changes nothing (SPEC R45). Signalled sources are performed in
/// ascending ``order``, then in the order they were first signalled (SPEC R46). A performed source
/// counts as a handled source (SPEC R15). A source, signalled or not, keeps its modes alive
/// (SPEC R10), which is the classic way to keep a resident thread's loop running.
///
/// ```swift
/// let source = LoopSource { print("performed on the loop's thread") }
/// loop.add(source, forMode: .default)
/// // any thread:
/// source.signal()
/// ```
///
/// A source may be in several loops and modes at once (SPEC R52); a signal is performed once, by
/// whichever of those loops gets to it first.
///
/// - Important: Safe from any thread. `perform` runs on the thread of a loop performing the
///   source; `schedule` and `cancel` run on the thread that adds, removes or invalidates it (or the
///   loop's thread at thread-exit teardown).
public final class LoopSource: @unchecked Sendable {
    // Thread-safety: the handlers, `order` and `label` are immutable. `signalSequence` and `valid` are
    // atomics; `valid` only changes with the source's stripe lock held, so an add (which registers
    // under that lock) and an invalidate (which reads the registrations under it) never miss each
    // other. Lock order: loop lock, then the stripe lock.

    /// The perform order: lower orders are performed first (SPEC R46).
    public let order: Int
    /// The name of the source's callouts in metrics, stall reports and traces, if it has one.
    public let label: StaticString?
    let performHandler: @Sendable () -> Void
    let scheduleHandler: (@Sendable (Loop, Loop.Mode) -> Void)?
    let cancelHandler: (@Sendable (Loop, Loop.Mode) -> Void)?

    /// 0 when not signalled; otherwise when the source was first signalled (a global sequence).
    let signalSequence = Atomic<UInt64>(0)
    let valid = Atomic<Bool>(true)

    struct Registration {
        weak var loop: Loop?
        /// In how many concrete modes of that loop the source is.
        var modeCount: Int
    }
    /// Guarded by the source's stripe lock (`withRegistrations`).
    @exclusivity(unchecked) private var registrations: [ObjectIdentifier: Registration] = [:]

    /// Runs `body` on the registrations with the source's stripe lock held. Never nest two.
    @inline(__always)
    func withRegistrations<R>(_ body: (inout [ObjectIdentifier: Registration]) -> R) -> R {
        LockStripes.lock(for: self).withLock { body(&registrations) }
    }

    private static let signalCounter = Atomic<UInt64>(1)

    /// Creates a source.
    ///
    /// - Parameters:
    ///   - order: Lower orders are performed first within a pass (SPEC R46). Defaults to 0.
    ///   - label: The name of the source's callouts in stall reports and traces (a static string:
    ///     no allocation). Defaults to none.
    ///   - schedule: Called each time the source enters a concrete mode of a loop (once per common
    ///     mode when added to ``Loop/Mode/common``, and again when a mode becomes common, SPEC R51).
    ///   - cancel: Called once per concrete mode when the source leaves it: on removal,
    ///     invalidation, and thread-exit teardown (SPEC R51).
    ///   - perform: The work, called on a loop's thread once per signal.
    public init(
        order: Int = 0,
        label: StaticString? = nil,
        schedule: (@Sendable (Loop, Loop.Mode) -> Void)? = nil,
        cancel: (@Sendable (Loop, Loop.Mode) -> Void)? = nil,
        perform: @escaping @Sendable () -> Void
    ) {
        self.order = order
        self.label = label
        self.performHandler = perform
        self.scheduleHandler = schedule
        self.cancelHandler = cancel
    }

    /// False once ``invalidate()`` was called.
    ///
    /// - Important: Safe from any thread.
    public var isValid: Bool { valid.load(ordering: .acquiring) }

    /// True between a ``signal()`` and the perform that consumes it.
    ///
    /// - Important: Safe from any thread.
    public var isSignalled: Bool { signalSequence.load(ordering: .acquiring) != 0 }

    /// Marks the source for performing and wakes the loops that run one of its modes
    /// (SPEC R45, M2). Coalesces with a signal not yet performed; does nothing on an invalid source.
    ///
    /// - Important: Safe from any thread.
    public func signal() {
        guard isValid else { return }
        let sequence = Self.signalCounter.wrappingAdd(1, ordering: .relaxed).oldValue
        guard
            signalSequence.compareExchange(
                expected: 0, desired: sequence, ordering: .acquiringAndReleasing
            ).exchanged
        else { return }
        let loops = withRegistrations { $0.values.compactMap(\.loop) }
        for loop in loops {
            loop.sourceWasSignalled(self)
        }
    }

    /// Removes the source from every mode of every loop, calling `cancel` once per mode
    /// (SPEC R51, R52). Idempotent; a source signalled but not yet performed is not performed.
    ///
    /// When it returns, `perform` is not running and will not run again — unless you call it on a
    /// loop's thread, from `perform` itself or another callout (the call then returns at once), or
    /// while `perform` runs a nested run of its loop. Called on another thread while a loop is in
    /// the middle of `perform`, it waits for `perform` to return; so `perform` must not wait for
    /// the thread that invalidates it.
    ///
    /// - Important: Safe from any thread, including the source's own perform.
    public func invalidate() {
        let loops: [Loop] = withRegistrations {
            guard valid.load(ordering: .relaxed) else { return [] }
            valid.store(false, ordering: .sequentiallyConsistent)  // the callout gate (Loop+Callouts)
            return $0.values.compactMap(\.loop)
        }
        for loop in loops { detachInvalidated(from: loop) }
    }

    /// Clears the signal before a perform (SPEC R46); false if there was none to clear (another loop
    /// performed it first).
    func consumeSignal() -> Bool {
        signalSequence.exchange(0, ordering: .acquiringAndReleasing) != 0
    }
}

extension LoopSource: LoopCalloutItem {
    var isValidForCallout: Bool { valid.load(ordering: .sequentiallyConsistent) }
    func leaveModes(of loop: Loop) { loop.removeInvalidated(self) }
}
