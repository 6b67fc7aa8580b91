import LoopRuntime

// One-shot waits — a submitted body's result, a thread's end, a test loop's idle point — are
// mailboxes too (Mailbox.swift): one value, not cancellable (the work was handed over and its
// answer must be waited for), and the same way back for a waiter pinned to a loop.

/// The producer's side of a one-shot wait: call ``complete(_:)`` once. Dropped without being
/// called (the work it was handed to was let go of unrun), it completes with its fallback, so that
/// no task is left waiting for ever.
///
/// - Important: Safe from any thread.
package final class OneShotCompletion<Value: Sendable>: Sendable {
    private let mailbox: Mailbox<SingleValue<Value>>
    private let fallback: @Sendable () -> Value

    fileprivate init(_ mailbox: Mailbox<SingleValue<Value>>, fallback: @escaping @Sendable () -> Value) {
        self.mailbox = mailbox
        self.fallback = fallback
    }

    /// Hands the waiter `value`; later calls do nothing.
    package func complete(_ value: Value) {
        mailbox.finish(delivering: value)
    }

    deinit {
        mailbox.finish(delivering: fallback())  // a no-op once completed
    }
}

extension Loop {
    /// Waits in the caller's isolation for the value `start` hands its completion — from any
    /// thread, typically this loop's. Not cancellable. Support for the `LoopTesting` module.
    ///
    /// - Parameters:
    ///   - name: The wait's name, for messages and seal holds (`"Loop.submit"`).
    ///   - fallback: The value if the completion is dropped uncalled.
    ///   - isolation: The caller's isolation, which the task stays in.
    ///   - start: Hands the work its completion.
    /// - Important: Safe from any task.
    package func waitOnce<Value: Sendable>(
        _ name: StaticString, isolation: isolated (any Actor)?,
        fallback: @escaping @Sendable () -> Value,
        _ start: (OneShotCompletion<Value>) -> Void
    ) async -> Value {
        let mailbox = Mailbox(on: self, buffer: SingleValue<Value>(), name: name, noun: "wait")
        start(OneShotCompletion(mailbox, fallback: fallback))
        let (value, _) = await mailbox.receive(isolation: isolation, cancellable: false)
        // The mailbox finishes only with a value (the completion's or its fallback).
        return value ?? fallback()
    }
}
