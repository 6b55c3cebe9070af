import EvanescoCore
import EvanescoIO
import EvanescoStack
import Foundation
import HTTPTestSupport
import Hummingbird
import HTTPTypes
import TestScenes
import Testing
@testable import EvanescoStudio

/// The erase brush through the studio's API: a stroke over what stood in 3 of 5 frames erases
/// it, exactly as the library does; undo brings back the merge as stacked. The same with every
/// frame's local field, for a burst held in memory and for one over the studio's memory limit
/// (stacked again from its files for each stroke, warped as the first time).
@Suite struct StudioErase {
    /// The fixture background with a red block at x 120..<160, y 60..<100 in frames 1...3.
    static func lingerFrame(_ k: Int) -> Image<UInt8> {
        var f = StudioFixtures.burstFrame(k)
        if (1...3).contains(k) { f.paint(x: 120..<160, y: 60..<100, (230, 20, 20)) }
        return f
    }

    @Test(arguments: [nil, 1])
    func aStrokeErasesWhatStoodStillAndUndoBringsItBack(memoryLimit: Int?) async throws {
        let s = StudioScratch()
        let studio = try StudioFixtures.studio(s) { $0.burstMemoryLimit = memoryLimit }
        defer { studio.shutdown() }
        let dir = s.folder("root/linger")
        for k in 0..<5 { try ImageCodecs.write(.uint8(Self.lingerFrame(k)), to: dir + String(format: "/f%02d.png", k)) }
        try await StudioFixtures.serve(studio) { client in
            let session: String = try await client.execute(
                uri: "/api/burst/open", method: .post, headers: client.fromPage,
                body: buffer(#"{"root":0,"path":"linger"}"#)
            ) { json($0.body)["session"] as! String }
            let stroke = #"{"points":[[130,80],[150,80]],"radius":28}"#
            try await client.execute(
                uri: "/api/burst/\(session)/erase", method: .post, headers: client.fromPage, body: buffer(stroke)
            ) {
                #expect($0.status == .conflict && errorMessage($0).contains("press Stack"))
            }
            let job: String = try await client.execute(
                uri: "/api/burst/\(session)/stack", method: .post, headers: client.fromPage,
                body: buffer(#"{"align":"local"}"#)
            ) {
                json($0.body)["job"] as! String
            }
            #expect(try await StudioWorkspaces.events(client, job: job).last == "done")
            func download() async throws -> Image<UInt8> {
                try await client.execute(
                    uri: "/api/burst/\(session)/download?format=tiff", method: .get, headers: authorized
                ) { r in
                    try ImageCodecs.decode(Array(buffer: r.body), path: "download").image.uint8
                }
            }
            let plain = try await download()
            #expect(plain[140, 80, 0] == 230 && plain[140, 80, 1] == 20, "the merge keeps the block: 3 of 5 frames")

            try await Self.refusedStrokes(client, session: session)
            // The stroke: the result is the library's erase of the same stroke, sample for sample.
            try await client.execute(
                uri: "/api/burst/\(session)/erase", method: .post, headers: client.fromPage, body: buffer(stroke)
            ) { r in
                #expect(r.status == .ok, "\(errorMessage(r))")
                let o = json(r.body), e = o["erase"] as? [String: Any] ?? [:]
                #expect(o["strokes"] as? Int == 1 && (e["remerged_pixels"] as? Int ?? 0) >= 1_400, "\(o)")
            }
            let erased = try await download()
            try Self.expectTheLibrarysErase(erased)
            let background = StudioFixtures.burstFrame(4)
            #expect(abs(Int(erased[140, 80, 0]) - Int(background[140, 80, 0])) <= 3, "the background shows again")
            try await client.execute(uri: "/api/burst/\(session)/report", method: .get, headers: authorized) { r in
                #expect(json(r.body)["strokes"] as? Int == 1 && json(r.body)["erase"] != nil)
            }
            try await client.execute(uri: "/api/burst/\(session)/image?which=result", method: .get, headers: authorized)
            { #expect($0.status == .ok) }

            // Undo: the merge as stacked, bit for bit.
            try await client.execute(uri: "/api/burst/\(session)/erase/undo", method: .post, headers: client.fromPage) {
                r in
                #expect(r.status == .ok && json(r.body)["strokes"] as? Int == 0)
            }
            #expect(try await download().samples == plain.samples)

            // At most EraseStroke.maximumStrokes strokes: each re-erases their union, so a session
            // without a bound slowed down stroke by stroke. (In memory only: over the limit each
            // stroke stacks the burst again.)
            if memoryLimit == nil {
                for k in 0..<EraseStroke.maximumStrokes {
                    try await client.execute(
                        uri: "/api/burst/\(session)/erase", method: .post, headers: client.fromPage,
                        body: buffer(stroke)
                    ) { r in #expect(r.status == .ok && json(r.body)["strokes"] as? Int == k + 1, "\(errorMessage(r))")
                    }
                }
                try await client.execute(
                    uri: "/api/burst/\(session)/erase", method: .post, headers: client.fromPage, body: buffer(stroke)
                ) { r in
                    #expect(
                        r.status == .conflict && errorMessage(r).contains("at most 100 strokes"), "\(errorMessage(r))")
                }
            }
        }
    }
}

extension StudioErase {
    /// Refused strokes: bad radius, a point that is not [x, y], and a stroke over what every
    /// frame shows. An unknown key is refused by name, and a body that is not JSON in words, never
    /// as the decoder's own description. Undo with no stroke is a conflict.
    static func refusedStrokes(_ client: StudioClient, session: String) async throws {
        // An unknown key is refused by name, and a body that is not JSON in words, never as the
        // decoder's own description.
        for (body, field) in [
            (#"{"points":[[10,10]],"radius":0}"#, "radius"), (#"{"points":[[10]],"radius":5}"#, "points"),
            (#"{"points":[[10,10]],"radius":5,"radious":3}"#, "unknown setting \"radious\""),
            (#"{"points":"#, "not valid JSON"), (#"{"points":[[10,10]]}"#, "\"radius\" is missing")
        ] {
            try await client.execute(
                uri: "/api/burst/\(session)/erase", method: .post, headers: client.fromPage, body: buffer(body)
            ) { r in
                #expect(r.status == .badRequest && errorMessage(r).contains(field), "\(errorMessage(r))")
                #expect(
                    !errorMessage(r).contains("DecodingError") && !errorMessage(r).contains("codingPath"),
                    "\(errorMessage(r))")
            }
        }
        try await client.execute(
            uri: "/api/burst/\(session)/erase", method: .post, headers: client.fromPage,
            body: buffer(#"{"points":[[20,110]],"radius":10}"#)
        ) { r in
            #expect(
                r.status == .unprocessableContent && errorMessage(r).contains("no frame saw behind"),
                "\(errorMessage(r))")
        }
        try await client.execute(uri: "/api/burst/\(session)/erase/undo", method: .post, headers: client.fromPage) {
            #expect($0.status == .conflict)
        }
    }

    /// The studio's erased download is the library's erase of the same stroke, sample for sample.
    static func expectTheLibrarysErase(_ erased: Image<UInt8>) throws {
        let frames = (0..<5).map { BurstFrame(name: "f\($0)", image: .uint8(Self.lingerFrame($0))) }
        var options = StackOptions()
        options.collectMaps = true
        options.align = .local
        let library = try BurstStacker.stack(frames, options: options)
        let mask = EraseMask(
            width: 192, height: 128, strokes: [EraseStroke(points: [[130, 80], [150, 80]], radius: 28)])
        #expect(library.localFields.compactMap { $0 }.count == 4)
        let expected = try BurstStacker.erase(mask, from: library, frames: frames).image.uint8
        let differing = zip(erased.samples, expected.samples).filter { $0 != $1 }.count
        #expect(
            erased.samples.count == expected.samples.count && differing == 0,
            "\(differing) samples differ from the library's erase")
    }
}
