import EvanescoCore
import EvanescoIO
import Foundation
import Testing

/// Compares each rendering with its golden PNG in `Golden/` beside this file (within 1 level), or
/// rewrites the goldens when EVANESCO_UPDATE_GOLDEN=1.
func checkGolden(_ renders: [(name: String, image: Image<UInt8>)]) throws {
    let dir = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Golden").path
    let update = ProcessInfo.processInfo.environment["EVANESCO_UPDATE_GOLDEN"] == "1"
    for (name, img) in renders {
        let path = "\(dir)/\(name).png"
        if update {
            try ImageCodecs.write(.uint8(img), to: path, options: WriteOptions(overwrite: true))
            continue
        }
        let g = try ImageCodecs.read(path).image.uint8
        #expect(g.width == img.width && g.height == img.height && g.channels == img.channels, "\(name)")
        let worst = zip(g.samples, img.samples).map { abs(Int($0) - Int($1)) }.max() ?? 0
        #expect(worst <= 1, "\(name): differs from its golden image by \(worst)")
    }
}
