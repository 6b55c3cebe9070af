import CRaw
import EvanescoCore
import EvanescoIO
import Foundation

extension Bench {
    /// A 12 MP DNG from make_raw_burst.py (pug.heic at full size, no occluders, ISO 400), made
    /// once into .build/raw-bench.
    func rawBenchDNG() throws -> String {
        let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent(".build/raw-bench/pug12").path
        let dng = dir + "/frames/f00.dng"
        if !FileManager.default.fileExists(atPath: dng) {
            print("  making a 12 MP DNG with make_raw_burst.py (about 30 s)")
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            p.arguments = [
                "python3", shared + "/bench/make_raw_burst.py", "--base",
                shared + "/data/depth/pug-iphone13pro/pug.heic",
                "--out", dir, "--frames", "2", "--objects", "0", "--iso-preset", "400", "--seed", "3", "--force"
            ]
            p.standardOutput = FileHandle.nullDevice
            try p.run()
            p.waitUntilExit()
            guard p.terminationStatus == 0 else { throw CocoaError(.fileReadUnknown) }
        }
        return dng
    }

    /// Reading, finishing and writing a 12 MP raw, each beside LibRaw's own work on the same file
    /// (its open + unpack; its AHD `dcraw_process`), and the DNG write beside writing the samples'
    /// bytes alone (the disk's floor).
    func raw() throws {
        let path = try rawBenchDNG()
        let bytes = try InputFile.read(path)
        var file = try RawCodec.decode(bytes, path: path)
        print("  \(path): \(file.width)x\(file.height) \(file.container), CFA \(file.raw.cfa?.description ?? "linear")")
        let lr = libraw_init(0)!
        defer { libraw_close(lr) }
        var copy = bytes
        compare(
            "raw read 12 MP DNG from its file", "RawCodec.read", { file = try! RawCodec.read(path) },
            "LibRaw open_file + unpack", { precondition(libraw_open_file(lr, path) == 0 && libraw_unpack(lr) == 0) })
        var finished = Image<UInt16>(width: 0, height: 0, channels: 3)
        compare(
            "raw finish 12 MP to 16-bit sRGB", "RawFinish.render",
            { finished = try! RawFinish.render(file.raw, as: UInt16.self) }, "LibRaw dcraw_process (AHD)",
            {
                copy.withUnsafeMutableBytes { b in
                    precondition(libraw_open_buffer(lr, b.baseAddress, b.count) == 0 && libraw_unpack(lr) == 0)
                }
                libraw_set_output_bps(lr, 16)
                libraw_set_demosaic(lr, 3)
                precondition(libraw_dcraw_process(lr) == 0)
            })
        print("  finished \(finished.width)x\(finished.height)")
        let scratch = NSTemporaryDirectory() + "/evanesco-raw-bench-\(getpid())"
        try FileManager.default.createDirectory(atPath: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let samples = file.raw.samples.samples.withUnsafeBytes { Array($0) }
        compare(
            "raw write 12 MP DNG", "DNGWriter.write",
            { try! DNGWriter.write(file.raw, to: scratch + "/out.dng", overwrite: true) },
            "the same samples' bytes written atomically",
            { try! AtomicOutput.write(samples, to: scratch + "/out.bin", overwrite: true) })
    }
}
