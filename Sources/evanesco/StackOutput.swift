import ArgumentParser
import EvanescoCore
import EvanescoIO
import EvanescoStack
import Foundation

/// Writes a stack's result: a picture as merged, a raw burst's merged mosaic as a DNG, or that
/// mosaic finished into a picture.
enum StackOutput {
    /// Refuses, before any work, a .dng output for a burst that is not of camera raws.
    static func check(_ output: String, inputs: [String]) throws {
        guard ImageFormat.forOutput(extension: (output as NSString).pathExtension) == .raw else { return }
        guard BurstInput.isRawBurst(InputFile.expandedQuietly(inputs)) else {
            throw ValidationError(
                "\(output): a .dng output holds a merged raw mosaic, and these inputs are not camera raws; name "
                    + "the output .jpg, .png or .tif")
        }
    }

    /// Writes `result` to `path`: its DNG (raw bursts to .dng), else its picture at `bitDepth`
    /// (default: 16 for a finished raw burst, except JPEG's 8; the frames' depth otherwise).
    ///
    /// - Returns: The size written (the mosaic's for a DNG, the upright picture's otherwise).
    static func write(
        _ result: StackResult, to path: String, finish: RawFinishOptions, bitDepth: Int?, options: WriteOptions
    ) throws -> (Int, Int) {
        let format = ImageFormat.forOutput(extension: (path as NSString).pathExtension)
        if let raw = result.raw, format == .raw {
            let n = result.usedFrames
            try DNGWriter.write(
                raw.mosaic, to: path, overwrite: options.overwrite,
                description: "merged by Evanesco from \(n) frames (\(result.merge.rawValue))")
            return (raw.mosaic.width, raw.mosaic.height)
        }
        var (image, metadata) = try result.picture(finish: finish)
        let depth = bitDepth ?? (result.raw != nil && format != .jpeg ? 16 : nil)
        if let b = depth { image = b == 8 ? .uint8(image.uint8) : .uint16(image.uint16) }
        var o = options
        o.metadata = metadata
        try ImageCodecs.write(image, to: path, options: o)
        return (image.width, image.height)
    }
}
