// swift-tools-version:6.0
// libFuzzer targets over the parsers (run them with scripts/fuzz.sh). A separate package: its
// targets need -parse-as-library (libFuzzer supplies main), an unsafe flag the library never uses.
import PackageDescription

let package = Package(
    name: "EvanescoFuzzTesting",
    dependencies: [.package(name: "Evanesco", path: "..")],
    targets: [
        .executableTarget(name: "FuzzJPEG", dependencies: [.product(name: "EvanescoFuzzEntries", package: "Evanesco")],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "FuzzPNG", dependencies: [.product(name: "EvanescoFuzzEntries", package: "Evanesco")],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "FuzzTIFF", dependencies: [.product(name: "EvanescoFuzzEntries", package: "Evanesco")],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "FuzzPFM", dependencies: [.product(name: "EvanescoFuzzEntries", package: "Evanesco")],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "FuzzEXIF", dependencies: [.product(name: "EvanescoFuzzEntries", package: "Evanesco")],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "FuzzXMP", dependencies: [.product(name: "EvanescoFuzzEntries", package: "Evanesco")],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "FuzzDepthJPEG", dependencies: [.product(name: "EvanescoFuzzEntries", package: "Evanesco")],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "FuzzHEIF", dependencies: [.product(name: "EvanescoFuzzEntries", package: "Evanesco")],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "FuzzCascade", dependencies: [.product(name: "EvanescoFuzzEntries", package: "Evanesco")],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "FuzzRawFrames", dependencies: [.product(name: "EvanescoFuzzEntries", package: "Evanesco")],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
        .executableTarget(name: "FuzzHomographies", dependencies: [.product(name: "EvanescoFuzzEntries", package: "Evanesco")],
                          swiftSettings: [.unsafeFlags(["-parse-as-library"])]),
    ],
    swiftLanguageModes: [.v6]
)
