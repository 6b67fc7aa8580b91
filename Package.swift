// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "LoopRuntime",
    products: [
        .library(name: "LoopRuntime", targets: ["LoopRuntime"]),
        .executable(name: "LoopDemo", targets: ["LoopDemo"]),
        .executable(name: "LoopBenchmarks", targets: ["LoopBenchmarks"]),
    ],
    targets: [
        // epoll, eventfd and timerfd are not exported by Glibc; this shim exposes them.
        .target(name: "CLoopRuntimeShims"),
        .target(name: "LoopRuntime", dependencies: ["CLoopRuntimeShims"]),
        .executableTarget(
            name: "LoopDemo",
            dependencies: ["LoopRuntime"],
            path: "Examples/LoopDemo"
        ),
        // Counts allocations by interposing malloc in the benchmark executable only.
        .target(name: "CMallocCounter", path: "Benchmarks/CMallocCounter"),
        // Swift 5 mode so that `import CoreFoundation` (the comparison) compiles.
        .executableTarget(
            name: "LoopBenchmarks",
            dependencies: ["LoopRuntime", "CMallocCounter"],
            path: "Benchmarks/LoopBenchmarks",
            swiftSettings: [.swiftLanguageMode(.v5)]
        ),
        .testTarget(name: "LoopRuntimeTests", dependencies: ["LoopRuntime", "CLoopRuntimeShims"]),
    ]
)
