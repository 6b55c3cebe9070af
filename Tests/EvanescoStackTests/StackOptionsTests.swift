import EvanescoCore
import Foundation
import Testing
@testable import EvanescoStack

@Suite("Stack options own their defaults and ranges")
struct StackOptionsTests {
    @Test("The defaults are the declared ones and pass validate()")
    func defaults() throws {
        let o = StackOptions()
        #expect(o.kappa == 2.5 && o.winsorFraction == 0.2 && o.videoFrames == 20 && o.memoryLimit == 1 << 30)
        #expect(Double(o.kappa) == StackOptions.Limits.kappa.defaultValue)
        try o.validate()
    }

    @Test(
        """
        Every setting refuses NaN, infinity and values out of range, naming itself; the spill directory must be a \
        writable folder
        """
    )
    func refusals() throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent(
            "evanesco-not-a-folder-\(UUID().uuidString)"
        ).path
        FileManager.default.createFile(atPath: file, contents: Data([1]))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let cases: [(String, (inout StackOptions) -> Void)] = [
            ("reference frame", { $0.reference = -1 }), ("kappa", { $0.kappa = .nan }), ("kappa", { $0.kappa = 0 }),
            ("winsor fraction", { $0.winsorFraction = 0.5 }), ("align level", { $0.alignLevel = 5 }),
            ("half-resolution alignment threshold", { $0.halfResolutionAlignmentAbove = 0 }),
            ("video frames", { $0.videoFrames = 0 }),
            ("memory limit", { $0.memoryLimit = 1000 }),
            ("spill directory", { $0.spillDirectory = "/nonexistent-evanesco" }),
            ("spill directory", { $0.spillDirectory = file })
        ]
        for (setting, change) in cases {
            var o = StackOptions()
            change(&o)
            do {
                try o.validate()
                Issue.record("\(setting): accepted")
            } catch {
                #expect(error.setting == setting, "\(error)")
            }
        }
        var ok = StackOptions()
        ok.memoryLimit = nil
        ok.spillDirectory = FileManager.default.temporaryDirectory.path
        try ok.validate()
    }
}
