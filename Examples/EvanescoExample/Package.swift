// swift-tools-version:6.0
// An app that depends on Evanesco the way users do: by URL and version.
// EVANESCO_PACKAGE_URL points it at another copy (CI uses a tagged local clone).
import PackageDescription

let evanesco = Context.environment["EVANESCO_PACKAGE_URL"] ?? "https://github.com/evanesco-photo/evanesco"

let package = Package(
    name: "EvanescoExample",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(url: evanesco, from: "0.2.0")
    ],
    targets: [
        .executableTarget(
            name: "EvanescoExample",
            dependencies: [
                .product(name: "EvanescoCore", package: "evanesco"),
                .product(name: "EvanescoIO", package: "evanesco"),
                .product(name: "EvanescoStack", package: "evanesco"),
                .product(name: "EvanescoDepth", package: "evanesco")
            ])
    ]
)
