import ArgumentParser
import EvanescoCore
import EvanescoIO
import Foundation

struct Convert: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "convert",
        abstract:
            "Convert an image to JPEG, PNG (8/16-bit) or TIFF (8/16-bit, 32-bit float), upright; finish a camera raw, "
            + "or copy it to DNG.",
        discussion: """
            The input format is read from the file's bytes; the output format from OUT's extension. \
            The EXIF orientation is applied to the pixels (and reset to 1 in carried EXIF).

            A camera raw (DNG, CR2, CR3, NEF, ARW, ORF, RW2, PEF, Bayer RAF) is finished: levels, white \
            balance, demosaic, the camera's colour matrix to the chosen space (its ICC profile embedded), \
            exposure and tone. To .dng, its raw mosaic and colour metadata are written as a DNG.

            EXAMPLES:
              evanesco convert IMG_0001.HEIC out.jpg --quality 90 --keep-metadata
              evanesco convert scan.tif out.png --bit-depth 16
              evanesco convert scan.tif archive.png --compression best
              evanesco convert photo.dng out.tif --bit-depth 16 --color-space display-p3
              evanesco convert photo.nef lin.tif --bit-depth 32 --color-space linear-srgb
              evanesco convert photo.cr2 photo.dng
            """)

    @Argument(help: "Input image or camera raw.") var input: String
    @Argument(help: "Output image: .jpg, .png, .tif, or .dng for a raw input.") var output: String
    @Option(help: ArgumentHelp(JPEGQuality.help)) var quality = JPEGQuality.rendered
    @Option(
        help:
            ArgumentHelp(
                "Output bits per sample: 8, 16 (PNG, TIFF) or 32 (float TIFF). Default: the input's, where the format "
                    + "allows (16 for a raw).")
    )
    var bitDepth: Int?
    @OptionGroup var lossless: LosslessOptions
    @OptionGroup(title: "Camera raw input") var finish: RawFinishFlags
    @Flag(help: "Copy EXIF and the ICC profile to the output.") var keepMetadata = false
    @Flag(help: "Overwrite OUT if it exists.") var force = false

    func validate() throws {
        try checkQuality(quality)
        if let b = bitDepth, ![8, 16, 32].contains(b) {
            throw ValidationError("--bit-depth must be 8, 16 or 32, got \(b)")
        }
    }

    func run() throws {
        try reportingErrors {
            try AtomicOutput.check(files: [output], inputs: [input], overwrite: force)
            let bytes = try InputFile.read(input)
            if try ImageCodecs.format(of: bytes, path: input) == .raw {
                try convertRaw(bytes)
                return
            }
            let d = try ImageCodecs.decode(bytes, path: input)
            let opts = WriteOptions(
                quality: quality, bitDepth: bitDepth, metadata: keepMetadata ? d.metadata : nil, overwrite: force,
                compression: lossless.compression)
            try ImageCodecs.write(d.image, to: output, options: opts)
            try StandardOutput.line("\(output): \(d.image.width)x\(d.image.height), from \(d.format.name)")
        }
    }

    /// A raw input: finished into the output's depth (float for 32-bit, never through 16-bit),
    /// with its colour space's ICC profile; or, to .dng, its mosaic rewritten.
    func convertRaw(_ bytes: [UInt8]) throws {
        let file = try RawCodec.decode(bytes, path: input)
        let format = ImageFormat.forOutput(extension: (output as NSString).pathExtension)
        if format == .raw {
            try DNGWriter.write(file.raw, to: output, overwrite: force)
            try StandardOutput.line("\(output): \(file.width)x\(file.height) DNG, from \(file.container)")
            return
        }
        let o = finish.options
        let depth = bitDepth ?? (format == .jpeg ? 8 : 16)
        let image: AnyImage =
            depth == 32
            ? .float32(try RawCodec.finished(file.raw, options: o, as: Float.self, path: input))
            : .uint16(try RawCodec.finished(file.raw, options: o, as: UInt16.self, path: input))
        let meta = ImageMetadata(icc: ICCProfile.profile(for: o.colorSpace))
        let opts = WriteOptions(
            quality: quality, bitDepth: depth, metadata: meta, overwrite: force, compression: lossless.compression)
        try ImageCodecs.write(image.map(file.raw.orientation), to: output, options: opts)
        try StandardOutput.line(
            "\(output): \(image.width)x\(image.height), finished from \(file.container) (\(o.colorSpace.rawValue))")
    }
}
