import EvanescoCore
import EvanescoIO
import Foundation
import Testing

/// Inputs and manifests the batch tests make themselves: small bursts (a textured scene with a
/// square that moves, so the merge has something to remove), portrait photos with a disparity
/// map, and deliberately bad jobs.
enum BatchFixtures {
    /// A scene of `w` x `h` from `seed`, with a bright square at `x`.
    static func frame(_ w: Int, _ h: Int, seed: Int, squareAt x: Int) -> Image<UInt8> {
        Image<UInt8>(width: w, height: h, channels: 3) { d in
            for y in 0..<h {
                for i in 0..<w {
                    let o = (y * w + i) * 3
                    let v = (i * 7 + y * 13 + seed * 31) ^ (i * y + seed)
                    d[o] = UInt8(truncatingIfNeeded: v)
                    d[o + 1] = UInt8(truncatingIfNeeded: v >> 2)
                    d[o + 2] = UInt8(truncatingIfNeeded: seed * 40 + y)
                    if i >= x && i < x + w / 8 && y >= h / 4 && y < h / 4 + h / 6 {
                        d[o] = 255
                        d[o + 1] = 255
                        d[o + 2] = 255
                    }
                }
            }
        }
    }

    /// A burst folder of `frames` PNG frames.
    static func burst(in dir: String, _ name: String, seed: Int, frames: Int = 5, width: Int = 48, height: Int = 40)
        throws -> String
    {
        let folder = dir + "/" + name
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        for f in 0..<frames {
            try ImageCodecs.write(
                .uint8(frame(width, height, seed: seed, squareAt: (f * width / frames) % (width - width / 8))),
                to: folder + String(format: "/f%02d.png", f), options: WriteOptions(compression: .fast))
        }
        return folder
    }

    /// A portrait photo and its disparity map (nearer to the left).
    static func portrait(in dir: String, _ name: String, seed: Int) throws -> (photo: String, depth: String) {
        let photo = dir + "/\(name).png", depth = dir + "/\(name)-disparity.png"
        try ImageCodecs.write(
            .uint8(frame(64, 48, seed: seed, squareAt: seed % 40)), to: photo, options: WriteOptions(compression: .fast)
        )
        let map = Image<UInt8>(width: 64, height: 48, channels: 1) { d in
            for y in 0..<48 { for x in 0..<64 { d[y * 64 + x] = UInt8(255 - x * 3 - (y + seed) % 8) } }
        }
        try ImageCodecs.write(.uint8(map), to: depth, options: WriteOptions(compression: .fast))
        return (photo, depth)
    }

    /// One manifest line.
    static func line(_ id: String, _ kind: String, _ inputs: [String], _ output: String, _ options: [String: Any] = [:])
        -> String
    {
        let object: [String: Any] = ["id": id, "kind": kind, "inputs": inputs, "output": output, "options": options]
        return String(
            decoding: try! JSONSerialization.data(
                withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]), as: UTF8.self)
    }

    /// What a made manifest holds.
    struct Made {
        var manifest: String
        var outputs: String
        /// Good jobs: id -> (command line that makes the same output alone, output).
        var good: [String: (args: [String], output: String)]
        /// Bad jobs: id -> a piece of the message they must fail with.
        var bad: [String: String]
    }

    /// A manifest of `stacks` stacks (the first `big` of them 24 frames of 320x240, long enough to
    /// be caught running), `portraits` portraits and `bad` jobs that must fail.
    /// `big` of the stacks are bursts of `bigBurst` (frames, width, height) instead of the small
    /// default, so that a worker is still running them when a test stops or signals it; `bigAlign`
    /// "local" makes them several times slower again (seconds even in a release build).
    static func manifest(
        in dir: String, stacks: Int, portraits: Int, bad: Int, big: Int = 0,
        bigBurst: (frames: Int, width: Int, height: Int) = (24, 320, 240), bigAlign: String = "none"
    ) throws -> Made {
        let outputs = dir + "/out"
        try FileManager.default.createDirectory(atPath: outputs, withIntermediateDirectories: true)
        var lines: [String] = [], good: [String: ([String], String)] = [:], badJobs: [String: String] = [:]
        let merges = ["median", "mean", "robust", "sigma-clip"]
        for i in 0..<stacks {
            let burst =
                i < big
                ? try BatchFixtures.burst(
                    in: dir, "burst\(i)", seed: i, frames: bigBurst.frames, width: bigBurst.width,
                    height: bigBurst.height)
                : try BatchFixtures.burst(in: dir, "burst\(i)", seed: i)
            let merge = merges[i % merges.count]
            let align = i < big ? bigAlign : "none"
            let output = "out/stack\(i)." + (i % 3 == 0 ? "jpg" : "png")
            lines.append(line("stack\(i)", "stack", ["burst\(i)"], output, ["align": align, "merge": merge]))
            good["stack\(i)"] = (["stack", burst, "--align", align, "--merge", merge], dir + "/" + output)
        }
        for i in 0..<portraits {
            let (photo, depth) = try BatchFixtures.portrait(in: dir, "portrait\(i)", seed: i)
            let effect = ["blur", "spotlight", "mask", "color"][i % 4]
            let output = "out/portrait\(i)." + (i % 2 == 0 ? "jpg" : "png")
            lines.append(line("portrait\(i)", "portrait", [photo, depth], output, ["effect": effect, "focus": 0.6]))
            good["portrait\(i)"] = (
                ["portrait", photo, "--depth-map", depth, "--effect", effect, "--focus", "0.6"], dir + "/" + output
            )
        }
        if bad > 0 {
            _ = FileManager.default.createFile(
                atPath: dir + "/broken.png", contents: Data([0x89, 0x50, 0x4e, 0x47, 13, 10, 26, 10, 0, 0]))
            try ImageCodecs.write(.uint8(frame(32, 24, seed: 9, squareAt: 3)), to: dir + "/flat.png")
        }
        for i in 0..<bad {
            if i % 2 == 0 {
                lines.append(line("bad\(i)", "stack", ["broken.png", "broken.png"], "out/bad\(i).png"))
                badJobs["bad\(i)"] = "no input could be used"
            } else {
                lines.append(line("bad\(i)", "portrait", ["flat.png"], "out/bad\(i).jpg"))
                badJobs["bad\(i)"] = "has no depth or disparity map"
            }
        }
        let manifest = dir + "/jobs.jsonl"
        try (lines.joined(separator: "\n") + "\n").write(toFile: manifest, atomically: true, encoding: .utf8)
        return Made(
            manifest: manifest, outputs: outputs, good: good.mapValues { (args: $0.0, output: $0.1) }, bad: badJobs)
    }

    /// Leftover staging folders or temporary files anywhere under `dir`.
    static func leftovers(in dir: String) -> [String] {
        let all = FileManager.default.enumerator(atPath: dir)?.allObjects as? [String] ?? []
        return all.filter { ($0 as NSString).lastPathComponent.hasPrefix(".") }
    }

    /// Every good job's output equals, byte for byte, what the command alone writes.
    static func expectSameAsCommand(_ made: Made, ids: [String], scratch: String) throws {
        for id in ids {
            let (args, output) = try #require(made.good[id])
            let alone = scratch + "/alone-" + (output as NSString).lastPathComponent
            let r = try CLI.run(args + ["-o", alone, "--force"] + (args[0] == "stack" ? ["--quiet"] : []))
            #expect(r.status == 0, "\(id): \(r.err)")
            let a = FileManager.default.contents(atPath: alone), b = FileManager.default.contents(atPath: output)
            #expect(a != nil && a == b, "\(id): the batch's output differs from `evanesco \(args[0])` alone")
        }
    }
}
