// Checks that code runs on (or off) a loop's thread, for code whose correctness depends on it: a
// callback that touches thread-affine state, a blocking call that would deadlock on the loop.
// SwiftNIO's `preconditionInEventLoop` family, spelled for loops.

extension Loop {
    /// Traps unless called on this loop's thread, in every build configuration.
    ///
    /// ```swift
    /// func handleReadable() {
    ///     connection.loop.preconditionOnLoop()   // the socket's state is the loop thread's
    ///     …
    /// }
    /// ```
    ///
    /// - Parameters:
    ///   - message: What the caller was doing, added to the trap's message.
    ///   - file: The file named in the trap (the caller's, by default).
    ///   - line: The line named in the trap (the caller's, by default).
    /// - Important: Safe from any thread.
    @inlinable
    public func preconditionOnLoop(
        _ message: @autoclosure () -> String = String(), file: StaticString = #fileID, line: UInt = #line
    ) {
        if !isCurrentThread { failOnLoopCheck(expectedOnLoop: true, message(), file: file, line: line) }
    }

    /// Traps unless called on this loop's thread, in debug builds (`-Onone`);
    /// compiled out of optimized builds, like `assert`.
    ///
    /// - Parameters:
    ///   - message: What the caller was doing, added to the trap's message.
    ///   - file: The file named in the trap (the caller's, by default).
    ///   - line: The line named in the trap (the caller's, by default).
    /// - Important: Safe from any thread.
    @inlinable
    public func assertOnLoop(
        _ message: @autoclosure () -> String = String(), file: StaticString = #fileID, line: UInt = #line
    ) {
        assert(isCurrentThread || failOnLoopCheck(expectedOnLoop: true, message(), file: file, line: line))
    }

    /// Traps if called on this loop's thread, in every build configuration: for calls that block
    /// until the loop has done something (which the loop could then never do).
    ///
    /// - Parameters:
    ///   - message: What the caller was doing, added to the trap's message.
    ///   - file: The file named in the trap (the caller's, by default).
    ///   - line: The line named in the trap (the caller's, by default).
    /// - Important: Safe from any thread.
    @inlinable
    public func preconditionNotOnLoop(
        _ message: @autoclosure () -> String = String(), file: StaticString = #fileID, line: UInt = #line
    ) {
        if isCurrentThread { failOnLoopCheck(expectedOnLoop: false, message(), file: file, line: line) }
    }

    /// Traps if called on this loop's thread, in debug builds (`-Onone`); compiled
    /// out of optimized builds, like `assert`.
    ///
    /// - Parameters:
    ///   - message: What the caller was doing, added to the trap's message.
    ///   - file: The file named in the trap (the caller's, by default).
    ///   - line: The line named in the trap (the caller's, by default).
    /// - Important: Safe from any thread.
    @inlinable
    public func assertNotOnLoop(
        _ message: @autoclosure () -> String = String(), file: StaticString = #fileID, line: UInt = #line
    ) {
        assert(!isCurrentThread || failOnLoopCheck(expectedOnLoop: false, message(), file: file, line: line))
    }

    /// The trap of the checks above, out of line: its message names both threads.
    @usableFromInline
    @discardableResult
    func failOnLoopCheck(expectedOnLoop: Bool, _ message: String, file: StaticString, line: UInt) -> Bool {
        let what = message.isEmpty ? "" : " (\(message))"
        let text =
            expectedOnLoop
            ? "Expected to run on the thread of the \(self), but ran on thread \(ThreadIdentity.currentDebugName)\(what). Hand the work to the loop with perform(_:) or submit(_:), or pin the calling actor to the loop."
            : "Expected not to run on the thread of the \(self), but did\(what): a call that waits for the loop would wait for ever there. Call it from another thread or task, or use the async form."
        preconditionFailure(text, file: file, line: line)
    }
}

extension LoopThread {
    /// Traps unless called on this thread: ``Loop/preconditionOnLoop(_:file:line:)`` of its loop.
    ///
    /// - Important: Safe from any thread.
    @inlinable
    public func preconditionOnLoop(
        _ message: @autoclosure () -> String = String(), file: StaticString = #fileID, line: UInt = #line
    ) {
        if !loop.isCurrentThread { loop.failOnLoopCheck(expectedOnLoop: true, message(), file: file, line: line) }
    }

    /// Traps unless called on this thread, in debug builds:
    /// ``Loop/assertOnLoop(_:file:line:)`` of its loop.
    ///
    /// - Important: Safe from any thread.
    @inlinable
    public func assertOnLoop(
        _ message: @autoclosure () -> String = String(), file: StaticString = #fileID, line: UInt = #line
    ) {
        assert(loop.isCurrentThread || loop.failOnLoopCheck(expectedOnLoop: true, message(), file: file, line: line))
    }

    /// Traps if called on this thread: ``Loop/preconditionNotOnLoop(_:file:line:)`` of its loop.
    ///
    /// - Important: Safe from any thread.
    @inlinable
    public func preconditionNotOnLoop(
        _ message: @autoclosure () -> String = String(), file: StaticString = #fileID, line: UInt = #line
    ) {
        if loop.isCurrentThread { loop.failOnLoopCheck(expectedOnLoop: false, message(), file: file, line: line) }
    }

    /// Traps if called on this thread, in debug builds:
    /// ``Loop/assertNotOnLoop(_:file:line:)`` of its loop.
    ///
    /// - Important: Safe from any thread.
    @inlinable
    public func assertNotOnLoop(
        _ message: @autoclosure () -> String = String(), file: StaticString = #fileID, line: UInt = #line
    ) {
        assert(!loop.isCurrentThread || loop.failOnLoopCheck(expectedOnLoop: false, message(), file: file, line: line))
    }
}

/// Traps unless `modes` names a mode: work queued for no mode could never run (SPEC R57, R76).
///
/// - Parameters:
///   - call: The API's full name, for the message.
///   - target: Whose call it is ("the loop of thread …", "LoopThread '…'").
///   - defaults: The call's default mode list, which the message suggests.
///   - work: What the call queues ("block", "body").
@inline(__always)
package func preconditionSomeMode(
    _ modes: [Loop.Mode], in call: StaticString, of target: @autoclosure () -> String,
    defaults: StaticString = "[.common]", queuing work: StaticString = "block"
) {
    if modes.isEmpty { emptyModeListFailure(call, target(), defaults, work) }
}

@inline(never)
private func emptyModeListFailure(
    _ call: StaticString, _ target: String, _ defaults: StaticString, _ work: StaticString
) -> Never {
    preconditionFailure(
        "\(call) was given an empty mode list for \(target): the \(work) could never run. Pass \(defaults) (the default) or the modes it may run in."
    )
}
