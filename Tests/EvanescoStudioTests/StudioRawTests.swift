import EvanescoCore
import EvanescoIO
import Foundation
import Testing
@testable import EvanescoStudio

@Suite struct StudioRawTests {
    /// Three 120x80 raw frames (RGGB, a gradient) as DNGs in `folder`.
    static func writeRawBurst(_ folder: String) throws {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for k in 0..<3 {
            let w = 120, h = 80
            let samples = Image<UInt16>(width: w, height: h, channels: 1) { d in
                for y in 0..<h { for x in 0..<w { d[y * w + x] = UInt16(256 + x * 20 + y * 10 + k) } }
            }
            let raw = RawMosaic(
                samples: samples, layout: .bayer(.rggb), blackLevels: [256], whiteLevel: 4095,
                color: RawColor(
                    colorMatrix: [0.7, -0.2, -0.1, -0.45, 1.25, 0.15, -0.08, 0.16, 0.53], asShotNeutral: [0.45, 1, 0.66]
                ))
            try DNGWriter.write(raw, to: folder + "/r\(k).dng")
        }
    }

    @Test("A folder of DNGs is listed as a burst; opening it shows finished thumbnails")
    func rawBurstIsListedAndPreviewed() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s) { _ in try? Self.writeRawBurst(s.folder("root") + "/rawburst") }
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            try await client.execute(uri: "/api/files", method: .get, headers: authorized) { r in
                let entries = json(r.body)["entries"] as? [[String: Any]] ?? []
                let byPath = Dictionary(entries.map { ($0["path"] as! String, $0) }, uniquingKeysWith: { a, _ in a })
                #expect(byPath["rawburst"]?["kind"] as? String == "burst" && byPath["rawburst"]?["frames"] as? Int == 3)
                #expect(byPath["rawburst/r0.dng"]?["kind"] as? String == "image")
            }
            let session: String = try await client.execute(
                uri: "/api/burst/open", method: .post, headers: client.fromPage,
                body: buffer(#"{"root":0,"path":"rawburst"}"#)
            ) { r in
                #expect(r.status == .ok, "\(errorMessage(r))")
                return json(r.body)["session"] as? String ?? ""
            }
            try await client.execute(uri: "/api/burst/\(session)/thumb?index=1", method: .get, headers: authorized) {
                r in
                #expect(r.status == .ok)
                let img = try ImageCodecs.decode(Array(buffer: r.body), path: "thumb").image
                #expect(img.width == 120 && img.height == 80, "a thumbnail is never enlarged")
            }
        }
    }

    @Test("A raw burst is stacked on its planes: shown finished, downloaded as the library's DNG")
    func rawBurstStacksToDNG() async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s) { _ in try? Self.writeRawBurst(s.folder("root") + "/rawburst") }
        defer { studio.shutdown() }
        try await StudioFixtures.serve(studio) { client in
            let session: String = try await client.execute(
                uri: "/api/burst/open", method: .post, headers: client.fromPage,
                body: buffer(#"{"root":0,"path":"rawburst"}"#)
            ) { json($0.body)["session"] as! String }
            let job: String = try await client.execute(
                uri: "/api/burst/\(session)/stack", method: .post, headers: client.fromPage,
                body: buffer(#"{"align":"none","merge":"mean"}"#)
            ) { r in
                #expect(r.status == .ok, "\(errorMessage(r))")
                return json(r.body)["job"] as? String ?? ""
            }
            #expect(try await StudioWorkspaces.events(client, job: job).last == "done")
            try await client.execute(uri: "/api/burst/\(session)/report", method: .get, headers: authorized) { r in
                #expect(json(r.body)["dng"] as? Bool == true)
            }
            try await client.execute(
                uri: "/api/burst/\(session)/download?format=dng", method: .get, headers: authorized
            ) { r in
                #expect(r.status == .ok, "\(errorMessage(r))")
                let file = try RawCodec.decode(Array(buffer: r.body), path: "download.dng")
                #expect(file.width == 120 && file.height == 80 && file.raw.cfa == .rggb)
                // The mean of frames k = 0, 1, 2 (x * 20 + y * 10 + 256 + k), scaled to 16 bits.
                let k = 65535.0 / 4095, v = Double(256 + 7 * 20 + 5 * 10 + 1) * k
                #expect(abs(Double(file.raw.samples.samples[5 * 120 + 7]) - v) <= 1)
            }
            try await client.execute(
                uri: "/api/burst/\(session)/download?format=png16", method: .get, headers: authorized
            ) { r in
                let img = try ImageCodecs.decode(Array(buffer: r.body), path: "download").image
                #expect(img.width == 120 && img.height == 80 && img.bitDepth == 16)
            }
        }
    }
}
