// swift-tools-version: 6.1
import Foundation
import PackageDescription

// LoopRuntime's GLib integration: a loop hosted in a GMainContext (so GTK programs get @MainActor
// and DispatchQueue.main), and a GMainContext hosted in a loop. A package of its own so that the
// root package keeps no dependency; it needs GLib's development files (Debian: libglib2.0-dev),
// found with pkg-config, and GTK 4's (libgtk-4-dev) for the GTKCounter example.
//
// The root package is a path dependency, whose identity is its folder's name (whatever the
// checkout is called), so the manifest names it from its own path.
let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
let rootIdentity = root.lastPathComponent

let package = Package(
    name: "LoopGLib",
    products: [
        .library(name: "LoopGLib", targets: ["LoopGLib"]),
        .executable(name: "GTKCounter", targets: ["GTKCounter"]),
    ],
    dependencies: [.package(path: root.path)],
    targets: [
        .systemLibrary(
            name: "CGLib", path: "Sources/CGLib", pkgConfig: "glib-2.0", providers: [.apt(["libglib2.0-dev"])]),
        .systemLibrary(
            name: "CGTK", path: "Sources/CGTK", pkgConfig: "gtk4", providers: [.apt(["libgtk-4-dev"])]),
        .target(name: "CLoopGLibShims", dependencies: ["CGLib"]),
        .target(
            name: "LoopGLib",
            dependencies: [
                "CGLib", "CLoopGLibShims", .product(name: "LoopRuntime", package: rootIdentity),
            ]),
        .executableTarget(
            name: "GTKCounter",
            dependencies: [
                "CGTK", "LoopGLib", .product(name: "LoopRuntime", package: rootIdentity),
                .product(name: "LoopExecutor", package: rootIdentity),
            ],
            path: "Examples/GTKCounter"),
        // `swift run -c release GLibBenchmarks`: the figures of BENCHMARKS.md's GLib section.
        .target(name: "CGLibBenchmarkSupport", path: "Benchmarks/CGLibBenchmarkSupport"),
        .executableTarget(
            name: "GLibBenchmarks",
            dependencies: [
                "CGLib", "CGLibBenchmarkSupport", "LoopGLib", .product(name: "LoopRuntime", package: rootIdentity),
            ],
            path: "Benchmarks/GLibBenchmarks"),
        .testTarget(
            name: "LoopGLibTests",
            dependencies: [
                "CGLib", "LoopGLib", .product(name: "LoopRuntime", package: rootIdentity),
                .product(name: "LoopExecutor", package: rootIdentity),
            ]),
    ]
)
