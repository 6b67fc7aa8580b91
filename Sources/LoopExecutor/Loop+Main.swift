import LoopRuntime

extension Loop {
    /// Hands the main thread to the main loop while `body` runs, and returns when it is done.
    ///
    /// For programs whose main thread must be a run loop (a GUI toolkit, a thread-affine C
    /// library) but that want to write async code. Call it from a synchronous `main`, on the main
    /// thread: `body` starts as a task, and the main thread runs `Loop.main` (through a
    /// `LoopDriver`, so ``switchMode(to:isolation:)`` works) until `body` returns or throws.
    /// While the main loop runs a common mode it services `DispatchQueue.main`, so `@MainActor`
    /// code runs inside its passes, interleaved with its timers, sources and observers (SPEC R56).
    ///
    /// ```swift
    /// @main struct App {
    ///     static func main() throws {
    ///         try Loop.runMain {
    ///             await MainActor.run { window.show() }
    ///             try await Loop.main.sleep(for: .seconds(1))
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// - Parameter body: The program's async work.
    /// - Throws: What `body` throws, after the main loop stopped.
    /// - Precondition: called on the main thread, outside any run of the main loop.
    public static func runMain(_ body: @escaping @Sendable () async throws -> Void) throws {
        precondition(
            main.isCurrentThread,
            "Loop.runMain(_:) must be called on the main thread: it hands that thread to the main loop.")
        let driver = LoopDriver(loop: main)
        let outcome = MainOutcome()
        Task.detached {
            do {
                try await body()
            } catch {
                outcome.set(error)
            }
            driver.stop()
        }
        driver.run()
        if let error = outcome.error { throw error }
    }
}

/// The error `runMain`'s body threw, if any; written by the body's task before it stops the driver,
/// read on the main thread after `run()` returned.
private final class MainOutcome: @unchecked Sendable {
    // Written before `driver.stop()` (which takes locks the driver's return also takes), read after.
    private(set) var error: (any Error)?
    func set(_ error: any Error) { self.error = error }
}
