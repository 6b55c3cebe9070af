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

    /// Writes `result` (``StackResult/write(to:finish:bitDepth:options:)``), timing it as its encode.
    static func write(
        _ result: inout StackResult, to path: String, finish: RawFinishOptions, bitDepth: Int?, options: WriteOptions
    ) throws -> (width: Int, height: Int) {
        let start = Date()
        defer { result.timings.encode = Date().timeIntervalSince(start) }
        return try result.write(to: path, finish: finish, bitDepth: bitDepth, options: options)
    }
}
