// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "Evanesco",
    products: [
        .library(name: "EvanescoCore", targets: ["EvanescoCore"]),
        .library(name: "EvanescoIO", targets: ["EvanescoIO"]),
        .library(name: "EvanescoAlign", targets: ["EvanescoAlign"]),
        .library(name: "EvanescoStack", targets: ["EvanescoStack"]),
        .library(name: "EvanescoDepth", targets: ["EvanescoDepth"]),
        .library(name: "EvanescoFaces", targets: ["EvanescoFaces"]),
        .library(name: "EvanescoBatch", targets: ["EvanescoBatch"]),
        .executable(name: "evanesco", targets: ["evanesco"]),
        // The C interface (Sources/CEvanesco/include/evanesco.h), as a shared library: what the
        // Python package (python/) loads. scripts/build-release.sh links the Swift runtime and
        // Foundation into it, so it runs without the toolchain.
        .library(name: "EvanescoC", type: .dynamic, targets: ["EvanescoC"]),
        // Test support: the fuzz targets' bodies (FuzzTesting/ and the regression replay use them).
        .library(name: "EvanescoFuzzEntries", targets: ["EvanescoFuzzEntries"])
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
        // One trait, not the default two: SwiftPM writes the enabled traits' -D flags in a random
        // order each time it plans a build, so with two of them every other build recompiled
        // Hummingbird; ConfigurationSupport (swift-configuration readers) is not used here.
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: ["FullFoundation"]),
        .package(url: "https://github.com/apple/swift-log", from: "1.14.0"),
        // NIOCore is imported by the studio (its event loops); Hummingbird brings the same package.
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.81.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.6.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // SHA-256 of the batch outputs (receipts and queue rows): already built for postgres-nio.
        .package(url: "https://github.com/apple/swift-crypto.git", "3.9.0"..<"6.0.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1")
    ],
    targets: [
        // System-library shims: a module map and a header each, nothing else.
        .systemLibrary(
            name: "CTurboJPEG", pkgConfig: "libturbojpeg",
            providers: [.apt(["libturbojpeg0-dev"])]),
        .systemLibrary(
            name: "CPNG", pkgConfig: "libpng",
            providers: [.apt(["libpng-dev", "zlib1g-dev", "libdeflate-dev"])]),
        // libheif is opened on first use (dlopen, see its shim.h), not linked.
        .systemLibrary(name: "CHeif", providers: [.apt(["libheif-dev"])]),
        .systemLibrary(
            name: "CTIFF", pkgConfig: "libtiff-4",
            providers: [.apt(["libtiff-dev"])]),
        // LibRaw (thread-safe libraw_r) for camera raw files: linked, its C API through shim.h.
        .systemLibrary(name: "CRaw", providers: [.apt(["libraw-dev"])]),
        // glibc's <malloc.h> (mallopt), for the command-line tool's allocator tuning.
        .systemLibrary(name: "CMalloc"),

        // Hot loops compiled for any CPU and again with AVX2, chosen at run time (C: Swift cannot
        // give one function a wider instruction set without unsafe flags).
        .target(name: "CKernels", linkerSettings: [.linkedLibrary("deflate"), .linkedLibrary("z")]),
        .target(name: "EvanescoCore", dependencies: ["CKernels"]),
        .target(
            name: "EvanescoIO",
            dependencies: ["EvanescoCore", "CKernels", "CTurboJPEG", "CPNG", "CHeif", "CTIFF", "CRaw"]),
        .target(name: "EvanescoAlign", dependencies: ["EvanescoCore", "CKernels"]),
        .target(name: "EvanescoStack", dependencies: ["EvanescoCore", "EvanescoIO", "EvanescoAlign", "CKernels"]),
        .target(name: "EvanescoFaces", dependencies: ["EvanescoCore", "EvanescoIO"]),
        .target(name: "EvanescoDepth", dependencies: ["EvanescoCore", "EvanescoIO", "EvanescoFaces", "CKernels"]),
        // The studio: a local web app over the library (server, page resources, sessions).
        .target(
            name: "EvanescoStudio",
            dependencies: [
                "EvanescoCore", "EvanescoIO", "EvanescoAlign", "EvanescoStack", "EvanescoDepth", "EvanescoFaces",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")
            ],
            resources: [.copy("Resources")]),
        // Batches: manifests, resumable local runs and shards, and the PostgreSQL job queue.
        .target(
            name: "EvanescoBatch",
            dependencies: [
                "EvanescoCore", "EvanescoIO", "EvanescoStack", "EvanescoDepth", "EvanescoFaces",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log")
            ]),
        // The C interface: its header and types (C), and the functions behind them (Swift).
        .target(name: "CEvanesco"),
        .target(
            name: "EvanescoC",
            dependencies: ["CEvanesco", "EvanescoCore", "EvanescoIO", "EvanescoStack", "EvanescoDepth", "EvanescoFaces"]
        ),
        .target(
            name: "EvanescoFuzzEntries",
            dependencies: ["EvanescoCore", "EvanescoIO", "EvanescoStack", "EvanescoFaces", "CPNG"]),
        .executableTarget(
            name: "evanesco",
            dependencies: [
                "EvanescoCore", "EvanescoIO", "EvanescoAlign", "EvanescoStack", "EvanescoDepth", "EvanescoFaces",
                "EvanescoStudio", "EvanescoBatch", "CMalloc",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log")
            ]),
        .executableTarget(
            name: "EvanescoBenchmarks",
            dependencies: [
                "EvanescoCore", "EvanescoIO", "EvanescoAlign", "EvanescoStack", "EvanescoDepth", "EvanescoFaces",
                "EvanescoBatch", "CTurboJPEG", "CPNG", "CHeif", "CKernels", "CRaw",
                .product(name: "ArgumentParser", package: "swift-argument-parser")
            ],
            path: "Benchmarks/EvanescoBenchmarks"),

        .testTarget(name: "EvanescoCoreTests", dependencies: ["EvanescoCore", "CKernels"]),
        .testTarget(
            name: "EvanescoIOTests",
            dependencies: [
                "EvanescoCore", "EvanescoIO", "CTurboJPEG", "CPNG", "CKernels", "SharedTestData",
                "SubprocessTestSupport"
            ]),
        .testTarget(
            name: "EvanescoAlignTests",
            dependencies: ["EvanescoCore", "EvanescoIO", "EvanescoAlign", "CKernels", "SharedTestData", "TestScenes"]),
        .testTarget(
            name: "EvanescoStackTests",
            dependencies: ["EvanescoCore", "EvanescoIO", "EvanescoAlign", "EvanescoStack", "CKernels"]),
        .testTarget(
            name: "EvanescoDepthTests",
            dependencies: [
                "EvanescoCore", "EvanescoIO", "EvanescoDepth", "EvanescoFaces", "CKernels", "SharedTestData"
            ],
            exclude: ["Golden"]),
        .testTarget(
            name: "EvanescoCTests",
            dependencies: [
                "EvanescoC", "CEvanesco", "EvanescoCore", "EvanescoIO", "EvanescoStack", "EvanescoDepth", "TestScenes"
            ]),
        .testTarget(name: "EvanescoFacesTests", dependencies: ["EvanescoCore", "EvanescoIO", "EvanescoFaces"]),
        .testTarget(
            name: "EvanescoFuzzRegressionTests",
            dependencies: ["EvanescoFuzzEntries", "EvanescoCore", "EvanescoIO", "CPNG"],
            resources: [.copy("Regressions")]),
        // Test support: an HTTP/1.1 client over a socket, for the tests that talk to a real
        // server (the studio's API tests and the browser test's WebDriver).
        .target(name: "HTTPTestSupport", path: "Tests/HTTPTestSupport"),
        // ... and where the shared sample data is (../shared/data or $EVANESCO_SHARED_DATA), for every target.
        .target(name: "SharedTestData", path: "Tests/SharedTestData"),
        // ... and the scenes more than one target makes itself.
        .target(name: "TestScenes", dependencies: ["EvanescoCore"], path: "Tests/TestScenes"),
        // ... and child processes whose outputs are read as they come and whose waits are bounded.
        .target(name: "SubprocessTestSupport", path: "Tests/SubprocessTestSupport"),
        .testTarget(
            name: "EvanescoStudioTests",
            dependencies: [
                "EvanescoStudio", "EvanescoCore", "EvanescoIO", "EvanescoStack", "EvanescoDepth", "HTTPTestSupport",
                "TestScenes",
                .product(name: "Hummingbird", package: "hummingbird"), .product(name: "Logging", package: "swift-log")
            ]),
        .testTarget(
            name: "EvanescoBatchTests",
            dependencies: ["EvanescoBatch", "EvanescoCore", "EvanescoStack", "EvanescoDepth"]),
        .testTarget(
            name: "EvanescoCLITests",
            dependencies: [
                "evanesco", "EvanescoCore", "EvanescoIO", "EvanescoStack", "EvanescoDepth", "EvanescoBatch",
                "EvanescoStudio",
                "HTTPTestSupport",
                "SharedTestData", "SubprocessTestSupport", "TestScenes"
            ])
    ],
    swiftLanguageModes: [.v6]
)

// The tests in release configuration (EVANESCO_TEST_CONFIG=release, scripts/test.sh): this
// package's modules are compiled for @testable imports and nothing else is, so the test build
// reuses every dependency the release build (scripts/build-release.sh) compiled. CI runs its
// suites this way: the dependencies are compiled once, not once per configuration.
if Context.environment["EVANESCO_TEST_CONFIG"] == "release" {
    for target in package.targets where target.type != .system {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-enable-testing"])]
    }
}

// A sanitized build of this package's own code: EVANESCO_SANITIZE=address or thread in the
// environment compiles and links every target here with that sanitizer, and no dependency (they
// keep their plain build, so switching costs a rebuild of this package only; SwiftNIO and the rest
// are sanitized upstream). CI runs the whole suite under address and the concurrent suites under
// thread this way (scripts/sanitizers.sh). Unset, as it is for a package that depends on Evanesco,
// nothing is added: no unsafe flags.
if let sanitizer = Context.environment["EVANESCO_SANITIZE"], ["address", "thread"].contains(sanitizer) {
    for target in package.targets where target.type != .system {
        target.swiftSettings = (target.swiftSettings ?? []) + [.unsafeFlags(["-sanitize=\(sanitizer)"])]
        target.cSettings = (target.cSettings ?? []) + [.unsafeFlags(["-fsanitize=\(sanitizer)"])]
        target.linkerSettings = (target.linkerSettings ?? []) + [.unsafeFlags(["-sanitize=\(sanitizer)"])]
    }
    // ThreadSanitizer runs the suites of the code that splits its work over threads through raw
    // buffers (scripts/sanitizers.sh says which and why); the test product then holds only those,
    // so the instrumented build does not compile the studio, the tool and suites it will not run.
    if sanitizer == "thread" {
        let concurrent = [
            "EvanescoCoreTests", "EvanescoAlignTests", "EvanescoStackTests", "EvanescoDepthTests", "EvanescoBatchTests"
        ]
        package.targets.removeAll { $0.type == .test && !concurrent.contains($0.name) }
    }
}

// The command-line tool, the benchmarks and the C library as shipped: scripts/build-release.sh sets
// EVANESCO_STATIC_RUNTIME=1 and these three products are linked with the Swift runtime and
// Foundation's static libraries (they start in milliseconds and run on a machine without the
// toolchain). Only their link changes, never a compile, so the sanitized test builds in the same
// .build/release (EVANESCO_TEST_CONFIG=release, scripts/test.sh) reuse every dependency this build compiled; the
// `--static-swift-stdlib` option would instead put -static-stdlib on every module's compile and
// the tests (swift-testing is a shared library only) could not share them. Foundation's static
// archives are named here because the modules were compiled for the shared ones, whose
// dependencies the dynamic linker found by itself.
if Context.environment["EVANESCO_STATIC_RUNTIME"] == "1" {
    let foundation = [
        "FoundationInternationalization", "FoundationEssentials", "_FoundationCollections", "CoreFoundation",
        "_FoundationICU", "_FoundationCShims", "BlocksRuntime", "dispatch", "swiftDispatch", "swiftSynchronization",
        "stdc++", "m"
    ]
    for target in package.targets where ["evanesco", "EvanescoBenchmarks", "EvanescoC"].contains(target.name) {
        target.linkerSettings =
            (target.linkerSettings ?? []) + [.unsafeFlags(["-static-stdlib"] + foundation.map { "-l\($0)" })]
    }
}
