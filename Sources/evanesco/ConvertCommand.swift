import ArgumentParser
import EvanescoCore
import EvanescoIO

struct Convert: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "convert",
        abstract: "Convert an image to JPEG, PNG (8/16-bit) or TIFF (8/16-bit, 32-bit float), upright.",
        discussion: """
            The input format is read from the file's bytes; the output format from OUT's extension. \
            The EXIF orientation is applied to the pixels (and reset to 1 in carried EXIF).

            EXAMPLES:
              evanesco convert IMG_0001.HEIC out.jpg --quality 90 --keep-metadata
              evanesco convert scan.tif out.png --bit-depth 16
              evanesco convert scan.tif archive.png --compression best
            """)

    @Argument(help: "Input image.") var input: String
    @Argument(help: "Output image: .jpg, .png or .tif.") var output: String
    @Option(help: ArgumentHelp(JPEGQuality.help)) var quality = JPEGQuality.rendered
    @Option(
        help:
            ArgumentHelp(
                "Output bits per sample: 8, 16 (PNG, TIFF) or 32 (float TIFF). Default: the input's, where the format "
                    + "allows.")
    )
    var bitDepth: Int?
    @OptionGroup var lossless: LosslessOptions
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
            let d = try ImageCodecs.read(input)
            let opts = WriteOptions(
                quality: quality, bitDepth: bitDepth, metadata: keepMetadata ? d.metadata : nil, overwrite: force,
                compression: lossless.compression)
            try ImageCodecs.write(d.image, to: output, options: opts)
            try StandardOutput.line("\(output): \(d.image.width)x\(d.image.height), from \(d.format.name)")
        }
    }
}
