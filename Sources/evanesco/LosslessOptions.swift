import ArgumentParser
import EvanescoIO

extension LosslessCompression: ExpressibleByArgument {}

/// `--compression`, the same for every command that writes PNG or TIFF.
struct LosslessOptions: ParsableArguments {
    @Option(
        help: """
            PNG/TIFF compression. The pixels are the same whatever the choice; best takes 20-30 times \
            longer for a file about a tenth smaller.
            """)
    var compression: LosslessCompression = .default
}
