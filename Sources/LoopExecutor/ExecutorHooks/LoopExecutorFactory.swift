// The executor factory (ExperimentalExecutorHooks trait): a whole program on loops.
#if ExperimentalExecutorHooks && compiler(>=6.3)
    @_spi(ExperimentalCustomExecutors) import _Concurrency
    import LoopRuntime
    import Synchronization

    /// Puts a program's Swift concurrency on loops: the main actor on the main loop
    /// (``MainLoopExecutor``) and the default executor on a group of loop threads
    /// (``LoopGroupExecutor/standard``).
    ///
    /// The one-line way, from a **synchronous** `main`:
    ///
    /// ```swift
    /// @main struct App {
    ///     static func main() throws {
    ///         try LoopExecutorFactory.runMain {           // on the main actor, in the main loop
    ///             try await Task.sleep(for: .seconds(1))   // a timer of a default-executor loop
    ///         }
    ///     }
    /// }
    /// ```
    ///
    /// `Task.sleep` leaves the caller's actor before it sleeps (Swift 6.3), so even from main-actor
    /// code it is a timer of the default executor's loops, and the task then hops back to the main
    /// loop. For a main-loop timer, call `Loop.main.sleep(for:)`.
    ///
    /// The other route is the language's own: an async `@main` type with
    /// `typealias DefaultExecutorFactory = LoopExecutorFactory` (and
    /// `@_spi(ExperimentalExecutorHooks) import LoopExecutor`, for the conformance). On Swift 6.3
    /// for Linux it takes effect only with `-Xfrontend -disable-availability-checking` (an unsafe
    /// flag: fine for an application, not for a package others depend on); without the flag the
    /// program compiles and silently keeps the stock executors. ``runMain(_:)`` needs no flag.
    ///
    /// Part of Swift's experimental executor SPI (ExperimentalExecutorHooks trait), which may change
    /// in any toolchain.
    public enum LoopExecutorFactory {
        /// Installs the factory's executors as the process's main and default executors (once; later
        /// calls do nothing). Returns true if the main actor now runs on the main loop.
        ///
        /// Call it before anything else touches Swift concurrency (the first statement of a
        /// synchronous `main`). Swift 6.3 for Linux also takes a later install, but only for jobs
        /// enqueued after it: tasks already running stay on the executors they started on.
        ///
        /// - Important: Call on the main thread.
        @discardableResult
        public static func install() -> Bool {
            if !installed.exchange(true, ordering: .acquiringAndReleasing) {
                _createExecutors(factory: LoopExecutorFactory.self)
            }
            return MainActor.executor is MainLoopExecutor
        }

        private static let installed = Atomic<Bool>(false)

        /// Installs the factory, runs `body` on the main actor while the main thread runs the main
        /// loop, and returns what `body` returned once it finished and the main actor's queued jobs
        /// ran.
        ///
        /// Call it as the first statement of a synchronous `main`, on the main thread. Everything
        /// `body` starts runs on loops: its main-actor work in the main loop's common modes (paused
        /// while the main loop runs another mode), its tasks on the default executor's loop
        /// threads, its `Task.sleep`s on timers of those threads' loops (even from the main actor:
        /// `Task.sleep` leaves the caller's actor first; `Loop.main.sleep(for:)` is a main-loop
        /// timer).
        ///
        /// - Parameter body: The program's async work, on the main actor.
        /// - Returns: What `body` returned.
        /// - Throws: What `body` threw.
        /// - Precondition: called on the main thread, from synchronous code outside any task; and the
        ///   runtime took the factory (else the main actor would not be the main loop's, and the
        ///   call traps with a message instead of running the program elsewhere).
        public static func runMain<Result: Sendable>(
            _ body: @escaping @MainActor () async throws -> Result
        ) throws -> Result {
            preconditionRunMainCaller(
                "LoopExecutorFactory.runMain(_:)", example: "try LoopExecutorFactory.runMain { … }")
            precondition(
                install(),
                "LoopExecutorFactory.runMain(_:): the Swift runtime did not take the executor factory, so the main actor is not the main loop's. Make runMain the first statement of a synchronous main, before anything starts a task or touches the main actor."
            )
            let executor = MainLoopExecutor.shared
            return try runMainActorBody(body, stop: executor.stop, drive: executor.run)
        }
    }

    // The SPI conformance: what `_createExecutors(factory:)` and an async main's
    // `typealias DefaultExecutorFactory = LoopExecutorFactory` read.
    @_spi(ExperimentalExecutorHooks)
    extension LoopExecutorFactory: ExecutorFactory {
        /// The main loop's executor: ``MainLoopExecutor/shared``.
        public static var mainExecutor: any MainExecutor { MainLoopExecutor.shared }

        /// The default executor: ``LoopGroupExecutor/standard``.
        public static var defaultExecutor: any TaskExecutor { LoopGroupExecutor.standard }
    }
#endif
