import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation
import Hummingbird
import HTTPTypes
import Testing
@testable import EvanescoStudio

extension StudioWorkspaces {
    /// A backdrop render's refusals come from the library's validate() and name the page's
    /// field, NaN included; the page's defaults and slider ranges are the library's.
    static func backdropRefusalsAndSettings(_ client: StudioClient, session: String) async throws {
        for (query, message) in [
            ("gamma=nan", "gamma must be within 0.05...10"),
            ("cutoffOffset=11", "cutoffOffset must be within 0...10 m"),
            ("blur=-1", "blur must be within 0...200 depth pixels at 640 wide"),
            ("cutoffOffset=abc", "cutoffOffset=abc is not a number")
        ] {
            try await client.execute(
                uri: "/api/backdrop/\(session)/render?\(query)", method: .get, headers: authorized
            ) { r in
                #expect(r.status == .badRequest)
                #expect(errorMessage(r).contains(message), "\(query): \(errorMessage(r))")
            }
        }
        // The page's defaults and slider ranges are the library's.
        let settings: [[String: Any]] = try await client.execute(
            uri: "/api/backdrop/settings", method: .get, headers: authorized
        ) { r in
            try #require(JSONSerialization.jsonObject(with: Data(buffer: r.body)) as? [[String: Any]])
        }
        let byField = Dictionary(
            uniqueKeysWithValues: settings.map { ($0["field"] as! String, $0["setting"] as! [String: Any]) })
        #expect(Set(byField.keys) == ["cutoffOffset", "blur", "gamma"])
        #expect(
            byField["cutoffOffset"]?["default_value"] as? Double == 0.25
                && byField["cutoffOffset"]?["unit"] as? String == "m")
        #expect(
            byField["gamma"]?["default_value"] as? Double == 0.55 && byField["gamma"]?["minimum"] as? Double == 0.05
        )
        #expect(
            byField["blur"]?["default_value"] as? Double == 5.3
                && byField["blur"]?["typical_maximum"] as? Double == 30)
    }

    /// The burst's 16-bit download is the library's result, sample for sample, and the moving
    /// square is gone from it.
    static func downloadIsTheLibrarysResult(_ client: StudioClient, session: String) async throws {
        var options = StackOptions()
        options.reference = 1
        options.merge = .median
        let expected = try BurstStacker.stack(
            (0..<3).map { BurstFrame(name: "\($0)", image: .uint8(StudioFixtures.burstFrame($0))) },
            options: options
        ).image.uint8
        try await client.execute(
            uri: "/api/burst/\(session)/download?format=png16", method: .get, headers: authorized
        ) { r in
            #expect(r.headers[.contentDisposition]?.contains("attachment; filename=\"burst-stacked.png\"") == true)
            let got = try ImageCodecs.decode(Array(buffer: r.body), path: "download").image
            guard case .uint16(let g16) = got else {
                Issue.record("not 16-bit")
                return
            }
            #expect(g16.width == expected.width && g16.height == expected.height)
            #expect(g16.samples.map { UInt8((Int($0) + 128) / 257) } == Array(expected.samples))
            // The moving square is gone: where frame 1 had it, the background shows.
            let background = StudioFixtures.burstFrame(2)
            let i = (55 * 192 + 60) * 3
            #expect(expected.samples[i] == background.samples[i])
        }
    }

    /// A depth render's refusals (NaN, out of range, unknown views) name the page's field with
    /// the library's words and range; GET /api/depth/settings serves the library's declarations.
    static func depthRefusalsAndSettings(_ client: StudioClient, session: String) async throws {
        for bad in ["focus=nan", "focus=inf", "focus=2", "slope=-1", "effect=mask", "view=x", "refine=magic"] {
            try await client.execute(
                uri: "/api/depth/\(session)/render?\(bad)&seq=5", method: .get, headers: authorized
            ) { r in
                #expect(r.status == .badRequest, "\(bad)")
            }
        }
        // Ranges are the library's, and a refusal names the page's field with the library's words.
        for (bad, message) in [
            ("slope=2000", "slope must be within (0, 1000]"), ("radius=0", "radius must be within (0, 500] pixels"),
            ("aperture=1001&effect=lens", "aperture must be within (0, 1000] pixels")
        ] {
            try await client.execute(
                uri: "/api/depth/\(session)/render?\(bad)&seq=6", method: .get, headers: authorized
            ) { r in
                #expect(r.status == .badRequest && errorMessage(r).contains(message), "\(bad): \(errorMessage(r))")
            }
        }
        try await client.execute(
            uri: "/api/depth/\(session)/render?effect=blur&radius=300&seq=7", method: .get, headers: authorized
        ) { r in
            #expect(r.status == .ok, "radius 300 is within the library's range (the studio once refused it)")
        }
        let settings: [[String: Any]] = try await client.execute(
            uri: "/api/depth/settings", method: .get, headers: authorized
        ) { r in
            try #require(JSONSerialization.jsonObject(with: Data(buffer: r.body)) as? [[String: Any]])
        }
        let byField = Dictionary(
            uniqueKeysWithValues: settings.map { ($0["field"] as! String, $0["setting"] as! [String: Any]) })
        #expect(Set(byField.keys) == ["focus", "slope", "width", "radius", "aperture"])
        let defaults = PortraitSettings()
        #expect((byField["slope"]?["default_value"] as? Double).map(Float.init) == defaults.slope)
        #expect((byField["width"]?["default_value"] as? Double).map(Float.init) == defaults.width)
        #expect((byField["radius"]?["default_value"] as? Double).map(Float.init) == defaults.radius)
        #expect(
            byField["focus"]?["default_value"] as? Double == 0.5 && byField["focus"]?["maximum"] as? Double == 1)
    }
}

extension StudioFilesAndUploads {
    /// Uploads refused each with its status and the library's one-line message: not an image
    /// though named so, truncated, not a kind the studio opens, over the size limit.
    static func refusedUploads(_ client: StudioClient, headers upload: HTTPFields) async throws {
        let png = try ImageCodecs.encode(.uint8(StudioFixtures.burstFrame(1)), format: .png)
        // Not an image, though it says so.
        try await client.execute(
            uri: "/api/upload?name=bad.jpg", method: .post, headers: upload, body: buffer("this is not a JPEG")
        ) { r in
            #expect(r.status == .unprocessableContent)
            #expect(errorMessage(r).hasPrefix("bad.jpg: "))
        }
        // Truncated: the library's own one-line error.
        try await client.execute(
            uri: "/api/upload?name=cut.png", method: .post, headers: upload,
            body: ByteBuffer(bytes: png.prefix(png.count / 2))
        ) { r in
            #expect(r.status == .unprocessableContent)
            let m = errorMessage(r)
            #expect(m.hasPrefix("cut.png: ") && !m.contains("\n"))
        }
        try await client.execute(
            uri: "/api/upload?name=notes.txt", method: .post, headers: upload, body: buffer("hello")
        ) { #expect($0.status == .unsupportedMediaType) }
        try await client.execute(
            uri: "/api/upload?name=big.png", method: .post, headers: upload,
            body: ByteBuffer(bytes: [UInt8](repeating: 0, count: 300_000))
        ) { r in
            #expect(r.status == .contentTooLarge)
            #expect(errorMessage(r).contains("MB"))
        }
    }
}
