import Foundation
import Testing

/// The shared sample data every test target reads (real photos, bursts, depth files): the
/// folder `$EVANESCO_SHARED_DATA` names, else `../shared/data` beside the checkout. Tests that
/// need it are skipped with ``absent`` when it is missing, and say so in the test output.
public enum SharedTestData {
    /// The folder.
    public static let root: String = {
        if let env = ProcessInfo.processInfo.environment["EVANESCO_SHARED_DATA"], !env.isEmpty { return env }
        // Tests/SharedTestData/SharedTestData.swift: three folders up is the package.
        let package = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return package.deletingLastPathComponent().appendingPathComponent("shared/data").path
    }()

    /// Whether it is there (its SOURCES.md is).
    public static var available: Bool { FileManager.default.fileExists(atPath: root + "/SOURCES.md") }

    /// The note a test skipped for want of it shows.
    public static let absent: Comment =
        "SKIPPED: ../shared/data is absent (set EVANESCO_SHARED_DATA); real-file checks did not run"

    /// A path inside it.
    ///
    /// - Parameter relative: e.g. `depth/pug-iphone13pro/pug.heic`.
    /// - Returns: The full path.
    public static func path(_ relative: String) -> String { root + "/" + relative }
}
