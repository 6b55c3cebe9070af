import ArgumentParser
import EvanescoIO

extension LosslessCompression: ExpressibleByArgument {}

/// `--compression`, the same for every command that writes PNG or TIFF.
struct LosslessOptions: ParsableArguments {
    @Option(help: """
        PNG/TIFF compression: fast, default or best. The pixels are the same; best takes several times \
        longer for a file about a tenth smaller. (default: default)
        """)
    var compression: LosslessCompression = .default
}
