import LoopRuntime

extension Loop {
    /// Hands the main thread to the main loop while `body` runs on the main actor, and returns
    /// what `body` returns.
    ///
    /// For programs whose main thread must be a run loop (a GUI toolkit, a thread-affine C
    /// library) but that want to write async code. Call it from a **synchronous** `main`, on the
    /// main thread: `body` starts as a main-actor task, and the main thread runs `Loop.main`
    /// (through a `LoopDriver`, so ``switchMode(to:isolation:)`` works) until `body` returns or
    /// throws. While the main loop runs a common mode it services `DispatchQueue.main`, so
    /// `@MainActor` code — `body` itself — runs inside its passes, interleaved with its timers,
    /// sources and observers (SPEC R56).
    ///
    /// ```swift
    /// @main struct App {
    ///     static func main() throws {
    ///         let exitCode = try Loop.runMain {
    ///             window.show()                                 // on the main actor
    ///             try await Loop.main.sleep(for: .seconds(1))
    ///             return 0
    ///         }
    ///         exit(exitCode)
    ///     }
    /// }
    /// ```
    ///
    /// Since `body` is on the main actor, it runs only in the main loop's common modes. Code that
    /// must go on while the main loop is in another mode (``withMode(_:isolation:_:)`` with a mode
    /// that is not common) belongs in a `nonisolated` async function that `body` awaits.
    ///
    /// An `async` `main` cannot call it: Swift concurrency already owns the main thread there (it
    /// drains the main queue itself), and the main loop can never take it over, so the call traps
    /// with a message. Use a synchronous `main` as above.
    ///
    /// - Parameter body: The program's async work, on the main actor.
    /// - Returns: What `body` returned, after the main loop stopped.
    /// - Throws: What `body` threw, after the main loop stopped.
    /// - Precondition: called on the main thread, from synchronous code outside any task and any
    ///   run of the main loop.
    public static func runMain<Result: Sendable>(
        _ body: @escaping @MainActor () async throws -> Result
    ) throws -> Result {
        preconditionRunMainCaller("Loop.runMain(_:)", example: "try Loop.runMain { … }")
        let driver = LoopDriver(loop: main)
        return try runMainActorBody(body, stop: driver.stop, drive: driver.run)
    }
}

/// Traps unless the caller of a `runMain` (`call`) may hand the main thread to the main loop: it
/// runs on the main thread, outside any task. Checked in that order, because in an async main the
/// code may not even run on the main thread any more.
func preconditionRunMainCaller(_ call: StaticString, example: StaticString) {
    precondition(
        withUnsafeCurrentTask { $0 == nil },
        "\(call) was called from async code (an async main, or a task). It must own the main thread, and in an async main Swift concurrency already does. Call it from a synchronous main, as its first statement: `static func main() throws { \(example) }`."
    )
    precondition(
        Loop.main.isCurrentThread, "\(call) must be called on the main thread: it hands that thread to the main loop.")
}

/// Starts `body` as a main-actor task that calls `stop` once it returned or threw, runs `drive`
/// (which must return after `stop`), and returns what `body` returned or rethrows what it threw.
func runMainActorBody<Result: Sendable>(
    _ body: @escaping @MainActor () async throws -> Result, stop: @escaping @Sendable () -> Void,
    drive: () throws -> Void
) throws -> Result {
    let outcome = MainOutcome<Result>()
    Task { @MainActor in
        do {
            outcome.set(.success(try await body()))
        } catch {
            outcome.set(.failure(error))
        }
        stop()
    }
    try drive()
    return try outcome.take().get()
}

/// What a main-actor body returned or threw; written by the body's task before it stops the main
/// loop, read on the main thread after the loop returned.
private final class MainOutcome<Value: Sendable>: @unchecked Sendable {
    // Written before `driver.stop()` (which takes locks the driver's return also takes), read after.
    private var result: Result<Value, any Error>?
    func set(_ result: Result<Value, any Error>) { self.result = result }
    func take() -> Result<Value, any Error> {
        guard let result else { preconditionFailure("runMain: the main loop stopped before the body finished") }
        return result
    }
}
