// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "LoopRuntime",
    products: [
        .library(name: "LoopRuntime", targets: ["LoopRuntime"]),
        .library(name: "LoopExecutor", targets: ["LoopExecutor"]),
        // Virtual-time loops for users' own tests; the main libraries never link it.
        .library(name: "LoopTesting", targets: ["LoopTesting"]),
        .executable(name: "LoopDemo", targets: ["LoopDemo"]),
        .executable(name: "ResidentThread", targets: ["ResidentThread"]),
        .executable(name: "BackgroundTimer", targets: ["BackgroundTimer"]),
        .executable(name: "DelayedPerform", targets: ["DelayedPerform"]),
        .executable(name: "ThreadAffineActor", targets: ["ThreadAffineActor"]),
        .executable(name: "ModeSwitching", targets: ["ModeSwitching"]),
        .executable(name: "TrackingMode", targets: ["TrackingMode"]),
        .executable(name: "StallDetector", targets: ["StallDetector"]),
        .executable(name: "TraceTimeline", targets: ["TraceTimeline"]),
        .executable(name: "MainLoop", targets: ["MainLoop"]),
        .executable(name: "ExitAndReentry", targets: ["ExitAndReentry"]),
        .executable(name: "PassHooks", targets: ["PassHooks"]),
        .executable(name: "ModalRun", targets: ["ModalRun"]),
        .executable(name: "HostedLoop", targets: ["HostedLoop"]),
        .executable(name: "EchoServer", targets: ["EchoServer"]),
        .executable(name: "ConcurrencyOnLoops", targets: ["ConcurrencyOnLoops"]),
        .executable(name: "LoopBenchmarks", targets: ["LoopBenchmarks"]),
    ],
    traits: [
        // Off by default: with it on, LoopExecutor adopts Swift 6.3's experimental executor SPI
        // (`SchedulingExecutor`, `MainExecutor`, `ExecutorFactory`), which may change or go away
        // in any toolchain. `swift build --traits ExperimentalExecutorHooks` turns it on.
        .trait(
            name: "ExperimentalExecutorHooks",
            description:
                "Task.sleep on loop timers, @MainActor on the main loop and the default executor on loops, through Swift's experimental executor SPI."
        ),
        .default(enabledTraits: []),
    ],
    targets: [
        // epoll, eventfd and timerfd are not exported by Glibc; this shim exposes them.
        .target(name: "CLoopRuntimeShims"),
        .target(name: "LoopRuntime", dependencies: ["CLoopRuntimeShims"]),
        .target(name: "LoopExecutor", dependencies: ["LoopRuntime", "CLoopRuntimeShims"]),
        .target(name: "LoopTesting", dependencies: ["LoopRuntime", "LoopExecutor"]),
        .executableTarget(
            name: "LoopDemo",
            dependencies: ["LoopRuntime", "LoopExecutor"],
            path: "Examples/LoopDemo"
        ),
        .executableTarget(
            name: "ResidentThread", dependencies: ["LoopRuntime"], path: "Examples/ResidentThread"),
        .executableTarget(
            name: "BackgroundTimer", dependencies: ["LoopRuntime"], path: "Examples/BackgroundTimer"),
        .executableTarget(
            name: "DelayedPerform", dependencies: ["LoopRuntime"], path: "Examples/DelayedPerform"),
        .executableTarget(
            name: "ThreadAffineActor", dependencies: ["LoopRuntime", "LoopExecutor"],
            path: "Examples/ThreadAffineActor"),
        .executableTarget(
            name: "ModeSwitching", dependencies: ["LoopRuntime", "LoopExecutor"],
            path: "Examples/ModeSwitching"),
        .executableTarget(
            name: "TrackingMode", dependencies: ["LoopRuntime", "LoopExecutor"],
            path: "Examples/TrackingMode"),
        .executableTarget(
            name: "EchoServer", dependencies: ["LoopRuntime", "LoopExecutor"],
            path: "Examples/EchoServer"),
        .executableTarget(
            name: "StallDetector", dependencies: ["LoopRuntime", "LoopExecutor"],
            path: "Examples/StallDetector"),
        .executableTarget(
            name: "TraceTimeline", dependencies: ["LoopRuntime", "LoopExecutor"],
            path: "Examples/TraceTimeline"),
        .executableTarget(
            name: "MainLoop", dependencies: ["LoopRuntime", "LoopExecutor"], path: "Examples/MainLoop"),
        .executableTarget(
            name: "ExitAndReentry", dependencies: ["LoopRuntime"], path: "Examples/ExitAndReentry"),
        .executableTarget(name: "PassHooks", dependencies: ["LoopRuntime"], path: "Examples/PassHooks"),
        .executableTarget(name: "ModalRun", dependencies: ["LoopRuntime"], path: "Examples/ModalRun"),
        .executableTarget(name: "HostedLoop", dependencies: ["LoopRuntime"], path: "Examples/HostedLoop"),
        // Needs the ExperimentalExecutorHooks trait; without it, it says so and exits.
        .executableTarget(
            name: "ConcurrencyOnLoops", dependencies: ["LoopRuntime", "LoopExecutor"],
            path: "Examples/ConcurrencyOnLoops"),
        // Allocation counting (malloc interposed in the benchmark executable only), thread CPU usage.
        .target(name: "CBenchmarkSupport", path: "Benchmarks/CBenchmarkSupport"),
        // Swift 5 mode so that `import CoreFoundation` (the comparison) compiles.
        .executableTarget(
            name: "LoopBenchmarks",
            dependencies: ["LoopRuntime", "LoopExecutor", "CLoopRuntimeShims", "CBenchmarkSupport"],
            path: "Benchmarks/LoopBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(name: "LoopRuntimeTests", dependencies: ["LoopRuntime", "CLoopRuntimeShims"]),
        .testTarget(
            name: "LoopExecutorTests",
            dependencies: ["LoopExecutor", "LoopRuntime", "MainLoopChecks", "ExecutorHookChecks"]),
        .testTarget(name: "LoopTestingTests", dependencies: ["LoopTesting", "LoopExecutor", "LoopRuntime"]),
        // Random programs run against the real CFRunLoop and LoopRuntime (Swift 5 mode, for
        // `import CoreFoundation`).
        .testTarget(
            name: "DifferentialTests", dependencies: ["LoopRuntime"],
            swiftSettings: [.swiftLanguageMode(.v5)]),
        // Checks that need the process's main thread (SPEC R56); spawned by LoopExecutorTests.
        .executableTarget(
            name: "MainLoopChecks", dependencies: ["LoopExecutor", "LoopRuntime", "CLoopRuntimeShims"],
            path: "Tests/MainLoopChecks"),
        // Checks of the process-wide executor hooks (ExperimentalExecutorHooks trait: the main
        // executor and the default executor are the process's own); spawned by LoopExecutorTests.
        .executableTarget(
            name: "ExecutorHookChecks", dependencies: ["LoopExecutor", "LoopRuntime"],
            path: "Tests/ExecutorHookChecks"),
    ]
)
