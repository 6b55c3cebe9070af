import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO

/// PngSuite, the PNG conformance suite's basic images (every colour type and bit depth, palettes,
/// transparency, Adam7 interlacing), written by scripts/pngsuite.sh (the README's test command
/// runs it through scripts/install-deps.sh) into .build/pngsuite or $EVANESCO_PNGSUITE.
enum PngSuite {
    static let folder: String = {
        if let env = ProcessInfo.processInfo.environment["EVANESCO_PNGSUITE"], !env.isEmpty { return env }
        let repo = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return repo.appendingPathComponent(".build/pngsuite").path
    }()
    static var files: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasSuffix(".png") }.sorted()
    }
}

@Suite struct PngSuiteTests {
    /// Every image reads, and written back at every compression setting (8 or 16 bits, grey, RGB
    /// or RGBA as read) reads again with the same pixels, through our reader and libpng's.
    @Test(.enabled(if: PngSuite.files.count == 28, "SKIPPED: PngSuite is absent; run scripts/pngsuite.sh (needs PyPI)"))
    func everyImageRoundTrips() throws {
        let t = TempDir()
        for name in PngSuite.files {
            let image = try ImageCodecs.read(PngSuite.folder + "/" + name).image
            for compression in LosslessCompression.allCases {
                let out = t.file("\(compression)-\(name)")
                try ImageCodecs.write(image, to: out, options: WriteOptions(compression: compression))
                let back = try ImageCodecs.read(out).image
                #expect(back == image, "\(name) at \(compression)")
                let libpng = try PNGCodec.decode(InputFile.read(out), path: out, limits: .standard, fastPath: false)
                    .image
                #expect(libpng == image, "\(name) at \(compression), through libpng")
            }
        }
    }
}
