import Foundation
import Testing
import EvanescoAlign
import EvanescoCore
import EvanescoIO
@testable import EvanescoStack

/// Bursts whose frames exceed the memory limit are decoded into an unnamed temporary file and
/// merged from it band by band: the result must be the in-memory result, exactly.
@Suite struct SpilledBursts {
    /// A fresh empty folder.
    func folder(_ name: String) throws -> String {
        let d = NSTemporaryDirectory() + "evanesco-spill-\(name)-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: true)
        return d
    }

    /// The synthetic burst (camera shifts and a moving occluder) written as PNG files, with an
    /// undecodable file among them.
    func burstFolder(sixteen: Bool, height: Int = 240) throws -> String {
        let dir = try folder("burst")
        let frames = burst(texturedScene(320, height), shifts: Stacker.shifts)
        for (k, f) in frames.enumerated() {
            let image: AnyImage = sixteen ? .uint16(f.image.uint16) : f.image
            try ImageCodecs.write(image, to: "\(dir)/f\(k).png", options: WriteOptions(compression: .fast))
        }
        try Data("not a picture".utf8).write(to: URL(fileURLWithPath: "\(dir)/f3b.png"))
        return dir
    }

    /// A spilled burst says which frames it converted to the slots' depth, as in memory.
    @Test func spilledBurstNoticesAnotherDepth() throws {
        let dir = try burstFolder(sixteen: false), spillDir = try folder("file")
        defer {
            try? FileManager.default.removeItem(atPath: dir)
            try? FileManager.default.removeItem(atPath: spillDir)
        }
        let f2 = try ImageCodecs.read("\(dir)/f2.png").image
        try ImageCodecs.write(
            .uint16(f2.uint16), to: "\(dir)/f2.png", options: WriteOptions(overwrite: true, compression: .fast))
        var o = StackOptions()
        let memory = try BurstStacker.stack(contentsOf: [dir], options: o)
        o.memoryLimit = 1
        o.spillDirectory = spillDir
        let spilled = try BurstStacker.stack(contentsOf: [dir], options: o)
        #expect(spilled.spilledBytes != nil)
        let converted = spilled.notices.filter { if case .depthConverted = $0 { true } else { false } }
        #expect(
            converted.count == 1
                && converted.first?.description.hasPrefix("\(dir)/f2.png: 16-bit frame merged as 8-bit") == true,
            "\(spilled.notices)")
        #expect(spilled.notices == memory.notices)
        #expect(spilled.image == memory.image)
    }

    /// Reference 0 (the default) registers each frame as it is decoded; another reference reads
    /// the frames back out of the file to register them.
    @Test(arguments: [(false, 0), (true, 0), (false, 2)])
    func spilledEqualsInMemory(sixteen: Bool, reference: Int) throws {
        let dir = try burstFolder(sixteen: sixteen), spillDir = try folder("file")
        defer {
            try? FileManager.default.removeItem(atPath: dir)
            try? FileManager.default.removeItem(atPath: spillDir)
        }
        var o = StackOptions()
        o.reference = reference
        o.collectMaps = true
        o.memoryLimit = nil
        let memory = try BurstStacker.stack(contentsOf: [dir], options: o)
        // A limit of one byte: every burst spills, and the merge runs in bands of 32 rows (8 here).
        o.memoryLimit = 1
        o.spillDirectory = spillDir
        let stages = LockedBox([StackStage: Int]())
        o.progress = { p in stages.update { $0[p.stage] = max($0[p.stage] ?? 0, p.done) } }
        let spilled = try BurstStacker.stack(contentsOf: [dir], options: o)
        #expect(memory.spilledBytes == nil)
        #expect((spilled.spilledBytes ?? 0) >= 8 * 320 * 240 * 3 * (sixteen ? 2 : 1))
        #expect(spilled.image.bitDepth == (sixteen ? 16 : 8))
        let same = spilled.image == memory.image
        #expect(same, "the spilled burst's result differs from the in-memory one")
        #expect(spilled.frames.map(\.homography) == memory.frames.map(\.homography))
        #expect(spilled.frames.count == 7 && spilled.usedFrames == memory.usedFrames)
        let sameMaps = spilled.maps?.kept == memory.maps?.kept && spilled.maps?.provenance == memory.maps?.provenance
        #expect(sameMaps && spilled.maps != nil, "the spilled burst's maps differ from the in-memory ones")
        #expect(spilled.notices.map(\.description) == memory.notices.map(\.description))
        #expect(spilled.skippedInputs == 1)
        // (Fused, registration is part of the decode stage.)
        #expect(
            stages.value[.decode] == 8 && stages.value[.align] == (reference == 0 ? nil : 6)
                && stages.value[.merge] == 240)
        #expect(spilled.referenceIndex == reference && spilled.frames[reference].status == .reference)
        // The file never had a name: nothing is left in its folder.
        #expect(try FileManager.default.contentsOfDirectory(atPath: spillDir).isEmpty)
        let report = StackReport(spilled, inputs: [dir], output: nil)
        #expect(report.framesHeld == "temporary file" && report.spilledBytes == spilled.spilledBytes)
    }

    /// A burst stacked again from its files with the first run's registrations and local fields
    /// (what the studio's erase brush does past the memory limit) warps exactly as the first run:
    /// the same picture, spilled or not. Without the fields it would not be.
    @Test func givenFieldsWarpAsTheFirstRun() throws {
        let dir = try burstFolder(sixteen: false), spillDir = try folder("file")
        defer {
            try? FileManager.default.removeItem(atPath: dir)
            try? FileManager.default.removeItem(atPath: spillDir)
        }
        var o = StackOptions()
        o.align = .local
        o.memoryLimit = nil
        let first = try BurstStacker.stack(contentsOf: [dir], options: o)
        #expect(first.localFields.compactMap { $0 }.count == 6, "every frame but the reference has a field")
        o.givenHomographies = first.frames.map(\.homography)
        o.givenFields = first.localFields
        o.memoryLimit = 1
        o.spillDirectory = spillDir
        let again = try BurstStacker.stack(contentsOf: [dir], options: o)
        #expect(again.spilledBytes != nil && again.frames.allSatisfy { $0.used })
        #expect(again.image == first.image, "stacked again with the given fields, the picture changed")
        #expect(again.localFields == first.localFields)
        o.givenFields = nil
        #expect(try BurstStacker.stack(contentsOf: [dir], options: o).image != first.image)
    }

    /// A video's frames past the limit go through the file too (read in order from ffmpeg while
    /// the previous ones are registered): the same result as in memory, nothing left behind.
    @Test func aVideoSpillsAndStacksAsInMemory() throws {
        let dir = try folder("video"), spillDir = try folder("file")
        defer {
            try? FileManager.default.removeItem(atPath: dir)
            try? FileManager.default.removeItem(atPath: spillDir)
        }
        let path = dir + "/clip.mp4"
        let w = try VideoWriter(path: path, width: 320, height: 240, framesPerSecond: 10)
        for f in burst(texturedScene(320, 240), shifts: Stacker.shifts) { try w.append(f.image.uint8) }
        try w.finish()
        var o = StackOptions()
        o.videoFrames = 5
        o.memoryLimit = nil
        let memory = try BurstStacker.stack(contentsOf: [path], options: o)
        o.memoryLimit = 1
        o.spillDirectory = spillDir
        let spilled = try BurstStacker.stack(contentsOf: [path], options: o)
        #expect(memory.spilledBytes == nil && (spilled.spilledBytes ?? 0) >= 5 * 320 * 240 * 3)
        #expect(spilled.frames.count == 5 && spilled.usedFrames == 5, "\(spilled.frames.map(\.status))")
        #expect(
            spilled.frames.map(\.source) == memory.frames.map(\.source) && spilled.frames.first?.source == "clip.mp4#0")
        #expect(spilled.frames.map(\.homography) == memory.frames.map(\.homography))
        let same = spilled.image == memory.image
        #expect(same, "the spilled video's result differs from the in-memory one")
        #expect(try FileManager.default.contentsOfDirectory(atPath: spillDir).isEmpty)
    }

    @Test func aFrameOfAnotherSizeIsRefusedAsInMemory() throws {
        let dir = try burstFolder(sixteen: false)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try ImageCodecs.write(
            .uint8(texturedScene(300, 240)), to: "\(dir)/f5.png",
            options: WriteOptions(overwrite: true, compression: .fast))
        var o = StackOptions()
        o.memoryLimit = nil
        let expected = StackError.sizeMismatch(
            frame: "\(dir)/f5.png", size: "300x240", reference: "\(dir)/f0.png", referenceSize: "320x240")
        #expect(throws: expected) { try BurstStacker.stack(contentsOf: [dir], options: o) }
        o.memoryLimit = 1
        #expect(throws: expected) { try BurstStacker.stack(contentsOf: [dir], options: o) }
        // Through the file, such a frame stops the stack at once: the frames after it are not
        // all decoded first.
        try ImageCodecs.write(
            .uint8(texturedScene(300, 240)), to: "\(dir)/f1.png",
            options: WriteOptions(overwrite: true, compression: .fast))
        let decoded = LockedBox(0)
        o.progress = { p in if p.stage == .decode { decoded.update { $0 = max($0, p.done) } } }
        #expect(
            throws: StackError.sizeMismatch(
                frame: "\(dir)/f1.png", size: "300x240", reference: "\(dir)/f0.png", referenceSize: "320x240")
        ) {
            try BurstStacker.stack(contentsOf: [dir], options: o)
        }
        #expect(decoded.value < 8, "\(decoded.value) of 8 files decoded before the stack stopped")
    }

    @Test func aFolderThatCannotHoldTheFileSaysWhatToDo() throws {
        let dir = try burstFolder(sixteen: false)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        var o = StackOptions()
        o.memoryLimit = 1
        o.spillDirectory = "/nonexistent-\(UUID().uuidString)"
        do {
            _ = try BurstStacker.stack(contentsOf: [dir], options: o)
            Issue.record("stacked with an impossible spill folder")
        } catch let e as StackError {
            guard case .spillFailed(let d, _) = e else {
                Issue.record("\(e)")
                return
            }
            #expect(
                d == o.spillDirectory && e.description.contains("spill directory")
                    && e.description.contains("memory limit") && !e.description.contains("--"))
        }
    }

    @Test func bandsKeepTheWorkingSetWithinHalfTheLimit() throws {
        let spill = try FrameSpill(directory: NSTemporaryDirectory(), frameBytes: 6000 * 4000 * 3, slots: 1)
        let source = BurstFrameSource(
            names: ["a"], width: 6000, height: 4000, channels: 3, eightBit: true, referenceMetadata: ImageMetadata(),
            memory: nil, spill: spill, slots: [0])
        // 100 frames of 24 MP, 1 GiB: 1.8 MB a row of all frames, so 298 rows within 512 MiB, less a margin.
        let rows = try #require(source.bandRows(frames: 100, limit: 1 << 30))
        #expect(rows == 224)
        #expect((rows + 64) * 100 * 6000 * 3 <= 1 << 29)
        #expect(source.bandRows(frames: 100, limit: 1) == 32)
        let inMemory = BurstFrameSource(
            names: ["a"], width: 6000, height: 4000, channels: 3, eightBit: true, referenceMetadata: ImageMetadata(),
            memory: [], spill: nil, slots: [])
        #expect(inMemory.bandRows(frames: 100, limit: 1 << 30) == nil)
    }
}
