// Without the ExperimentalExecutorHooks trait the executor hooks do not exist; these unavailable
// declarations stand in for them, so that code using them fails to compile with a message that
// says how to turn the trait on, instead of "cannot find 'LoopExecutorFactory' in scope".
#if !(ExperimentalExecutorHooks && compiler(>=6.3))
    /// Needs the package trait `ExperimentalExecutorHooks` (off by default), and Swift 6.3 or later.
    @available(
        *, unavailable,
        message:
            "LoopExecutorFactory needs LoopRuntime's package trait ExperimentalExecutorHooks (Swift 6.3+), which is off. In your Package.swift: .package(url: \"…/LoopRuntime.git\", from: \"…\", traits: [\"ExperimentalExecutorHooks\"]) (or .package(path: \"…\", traits: [\"ExperimentalExecutorHooks\"])); in this package: swift build --traits ExperimentalExecutorHooks"
    )
    public enum LoopExecutorFactory {
        /// Needs the package trait `ExperimentalExecutorHooks`.
        @available(
            *, unavailable,
            message:
                "LoopExecutorFactory.runMain needs LoopRuntime's package trait ExperimentalExecutorHooks (Swift 6.3+): add traits: [\"ExperimentalExecutorHooks\"] to the .package(…) line of LoopRuntime in your Package.swift"
        )
        public static func runMain<Result: Sendable>(
            _ body: @escaping @MainActor () async throws -> Result
        ) throws -> Result { fatalError("unavailable") }

        /// Needs the package trait `ExperimentalExecutorHooks`.
        @available(
            *, unavailable,
            message:
                "LoopExecutorFactory.install needs LoopRuntime's package trait ExperimentalExecutorHooks (Swift 6.3+): add traits: [\"ExperimentalExecutorHooks\"] to the .package(…) line of LoopRuntime in your Package.swift"
        )
        public static func install() -> Bool { fatalError("unavailable") }
    }

    /// Needs the package trait `ExperimentalExecutorHooks` (off by default), and Swift 6.3 or later.
    @available(
        *, unavailable,
        message:
            "MainLoopExecutor needs LoopRuntime's package trait ExperimentalExecutorHooks (Swift 6.3+), which is off: add traits: [\"ExperimentalExecutorHooks\"] to the .package(…) line of LoopRuntime in your Package.swift (in this package: swift build --traits ExperimentalExecutorHooks)"
    )
    public final class MainLoopExecutor {
        /// Needs the package trait `ExperimentalExecutorHooks`.
        public static var shared: MainLoopExecutor { fatalError("unavailable") }
    }

    /// Needs the package trait `ExperimentalExecutorHooks` (off by default), and Swift 6.3 or later.
    @available(
        *, unavailable,
        message:
            "LoopGroupExecutor needs LoopRuntime's package trait ExperimentalExecutorHooks (Swift 6.3+), which is off: add traits: [\"ExperimentalExecutorHooks\"] to the .package(…) line of LoopRuntime in your Package.swift (in this package: swift build --traits ExperimentalExecutorHooks)"
    )
    public final class LoopGroupExecutor {
        /// Needs the package trait `ExperimentalExecutorHooks`.
        public static var standard: LoopGroupExecutor { fatalError("unavailable") }
    }
#endif
