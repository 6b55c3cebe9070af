import ArgumentParser
import EvanescoAlign
import EvanescoCore
import EvanescoIO
import EvanescoStack
import Foundation

struct Stack: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stack",
        abstract: "Align a burst and merge it so that whatever moves vanishes.",
        discussion: """
            INPUT is image files, a folder of images (sorted by name) or one video file. Frames that \
            cannot be decoded or aligned are reported on stderr and left out. Two frames are merged by \
            their mean, since two cannot outvote a moving object. A hand-held burst whose near and far \
            things moved differently (parallax) gets local alignment on top of its homography: \
            automatically where a coarse look finds parallax, on every frame with --align local; the \
            report's frames[].local says what was done.

            --erase MASK: a picture the size of the result, white where what the merge kept must go \
            (someone who stood there most of the burst); those pixels are merged again from the \
            frames that saw behind, with a seam that does not show. --save-maps DIR writes the \
            frames kept per pixel, the frame that dominated (with a legend) and the local shift, as \
            8-bit pictures and 16-bit values. --homographies takes a JSON report (frames[].index, \
            frames[].homography) from --report or a truth.json. A burst whose decoded frames need \
            more than --memory-limit is decoded into an unnamed temporary file (in --spill-dir, \
            nothing is left there) and merged from it band by band. --interpolation catmullRom, the \
            old spelling of catmull-rom, is accepted too.

            Camera raws (DNG, CR2, NEF, ARW...) are stacked on the sensor's samples, \
            before any demosaic: frames of one camera and size (a bracket at its shortest \
            exposure), merged on their colour planes with the sensor's noise model; -o \
            x.dng writes the merged mosaic as a DNG, any other output is it finished (--color-space, \
            --tone, --white-balance, --exposure). --merge hdrplus is HDR+'s Wiener \
            merge, faithful to the reference, for raws only.

            EXAMPLES:
              evanesco stack burst/*.jpg -o clean.jpg
              evanesco stack street.mp4 --frames 30 -o clean.png --report report.json
              evanesco stack tripod/ --align none --merge median -o out.tif --bit-depth 16
              evanesco stack desk/ --align local -o clean.jpg --save-maps maps/
              evanesco stack square/*.jpg --erase tourist-mask.png -o clean.jpg
              evanesco stack raw/*.dng -o merged.dng --report report.json
            """)

    @Argument(help: "Image files, a folder of images, or one video.") var inputs: [String]
    @Option(name: .shortAndLong, help: "Output image (.jpg, .png, .tif), or .dng for camera raws.") var output: String
    @Option(help: .stack("align")) var align = StackOptions().align
    @Option(help: .stack("merge")) var merge = StackOptions().merge
    @Option(help: .stack("reference")) var reference = StackOptions().reference
    @Option(name: [.customLong("video-frames"), .customLong("frames")], help: .stack("videoFrames"))
    var videoFrames = StackOptions().videoFrames
    @Option(help: .stack("alignLevel")) var alignLevel: Int?
    @Option(help: .stack("halfResolutionAlignmentAbove"))
    var halfResolutionAlignmentAbove = StackOptions().halfResolutionAlignmentAbove
    @Option(help: .stack("interpolation")) var interpolation = StackOptions().interpolation
    @Option(help: .stack("rawSampling")) var rawSampling = StackOptions().rawSampling
    @Option(help: .stack("rawDenoise")) var rawDenoise = StackOptions().rawDenoise
    @Option(help: .stack("kappa")) var kappa = StackOptions().kappa
    @Option(help: .stack("winsorFraction")) var winsorFraction = StackOptions().winsorFraction
    @Flag(inversion: .prefixedNo, help: .stack("meanForTwoFrames")) var meanForTwoFrames = StackOptions()
        .meanForTwoFrames
    @Option(help: "Output bits per sample (8 or 16; default: the inputs').") var bitDepth: Int?
    @Option(help: ArgumentHelp(JPEGQuality.help)) var quality = JPEGQuality.master
    @OptionGroup var lossless: LosslessOptions
    @Option(help: "Registrations to use instead of aligning (see above).") var homographies: String?
    @Option(help: "Write the decoded and the aligned frames into a new DIR/<UUID>/.") var saveFrames: String?
    @Option(help: "Write per-pixel maps into DIR (see above).") var saveMaps: String?
    @Option(help: "Merge again, from the frames that saw behind, where MASK is white.") var erase: String?
    @Option(help: .stack("memoryLimit")) var memoryLimit = MemoryLimit.standard
    @Option(name: [.customLong("spill-directory"), .customLong("spill-dir")], help: .stack("spillDirectory"))
    var spillDirectory: String?
    @Option(help: "Write a JSON report (per-frame homographies, residuals, timings).") var report: String?
    @Flag(help: "Overwrite the output and report if they exist.") var force = false
    @Flag(help: "No progress on stderr.") var quiet = false
    @OptionGroup(title: "Camera raw bursts, finished to a picture") var finish: RawFinishFlags

    /// The library's settings from the flags (progress and given registrations are added by run()).
    func options() throws -> StackOptions {
        var options = StackOptions()
        options.align = align
        options.merge = merge
        options.reference = reference
        options.interpolation = interpolation
        options.rawSampling = rawSampling
        options.rawDenoise = rawDenoise
        options.kappa = kappa
        options.winsorFraction = winsorFraction
        options.alignLevel = alignLevel
        options.halfResolutionAlignmentAbove = halfResolutionAlignmentAbove
        options.meanForTwoFrames = meanForTwoFrames
        options.videoFrames = videoFrames
        options.retainFrames = saveFrames != nil
        options.memoryLimit = memoryLimit.bytes
        options.spillDirectory = spillDirectory
        options.collectMaps = saveMaps != nil
        return options
    }

    /// The flag of each setting the library names (its declared key in kebab-case).
    static let flags = StackOptions.flagsByName

    func validate() throws {
        let options = try options()
        try validateSettings(Self.flags) { () throws(SettingError) in try options.validate() }
        if let b = bitDepth, b != 8 && b != 16 { throw ValidationError("--bit-depth must be 8 or 16") }
        try checkQuality(quality)
        let ext = (output as NSString).pathExtension.lowercased()
        guard let format = ImageFormat.forOutput(extension: ext), !ext.hasPrefix("hei") else {
            throw ValidationError("\(output): name the output .jpg, .png or .tif (.dng for a burst of camera raws)")
        }
        if bitDepth == 16 && format == .jpeg {
            throw ValidationError("--bit-depth 16 needs a .png or .tif output; JPEG holds 8 bits")
        }
    }

    func run() throws {
        try reportingErrors {
            // Refuse before any work if an output would be clobbered.
            try AtomicOutput.check(
                files: [output, report] + StackMaps.existingPaths(in: saveMaps), directories: [saveFrames, saveMaps],
                inputs: inputs + [homographies, erase].compactMap { $0 }, overwrite: force)
            try StackOutput.check(output, inputs: inputs)
            let progress = ProgressDisplay(quiet: quiet)
            var options = try options()
            options.progress = progress.stackCallback
            options.erase = try erase.map { try EraseMask.read($0, forBurst: inputs) }
            if let path = homographies {
                let bytes = try InputFile.read(path)
                options.givenHomographies = try StackReport.homographies(from: bytes, name: path)
                StackReport.localFieldsNotice(in: bytes, name: path).map(Diagnostics.warning)
            }
            let start = Date()
            var result = try BurstStacker.stack(contentsOf: inputs, options: options)
            progress.finish()
            for n in result.notices {
                // The library says what to do in words; here, with the flag that does it.
                if case .depthConverted(_, let from, let to) = n, from > to {
                    Diagnostics.warning(n.description + " (--reference N)")
                } else {
                    Diagnostics.warning(n.description)
                }
            }
            let size = try StackOutput.write(
                &result, to: output, finish: finish.options, bitDepth: bitDepth,
                options: WriteOptions(quality: quality, overwrite: force, compression: lossless.compression))
            let saved = try saveFrames.map { try FrameSaver.save(result, to: $0, interpolation: interpolation) }
            if let dir = saveMaps { try FrameSaver.saveMaps(result, to: dir, overwrite: force) }
            result.timings.total = Date().timeIntervalSince(start)
            if let report {
                var r = StackReport(result, inputs: inputs, output: output)
                r.peakResidentMB = peakResidentMB()
                try ReportFile.write(r, settings: options, to: report, overwrite: force)
            }
            try StandardOutput.line(result.summary(output: output, size: (size.width, size.height)))
            if let erased = result.erase { try StandardOutput.line(erased.description) }
            if let saved { try StandardOutput.line("frames saved in \(saved)") }
            if let saveMaps { try StandardOutput.line("maps saved in \(saveMaps)") }
        }
    }
}
