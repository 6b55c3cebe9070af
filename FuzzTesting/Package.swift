// swift-tools-version:6.0
// libFuzzer targets over the parsers (run them with scripts/fuzz.sh). A separate package: its
// targets need -parse-as-library (libFuzzer supplies main), an unsafe flag the library never uses.
// Each target is one file calling its body in EvanescoFuzzEntries.
import PackageDescription

let names = [
    "FuzzJPEG", "FuzzPNG", "FuzzTIFF", "FuzzPFM", "FuzzEXIF", "FuzzXMP", "FuzzDepthJPEG", "FuzzHEIF",
    "FuzzCascade", "FuzzRawFrames", "FuzzHomographies", "FuzzDNG"
]

let package = Package(
    name: "EvanescoFuzzTesting",
    dependencies: [.package(name: "Evanesco", path: "..")],
    targets: names.map {
        .executableTarget(
            name: $0, dependencies: [.product(name: "EvanescoFuzzEntries", package: "Evanesco")],
            swiftSettings: [.unsafeFlags(["-parse-as-library"])])
    },
    swiftLanguageModes: [.v6]
)
