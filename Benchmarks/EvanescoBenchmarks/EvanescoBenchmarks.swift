import ArgumentParser
import EvanescoIO
import Foundation

/// Throughput benchmarks, run on demand (not timed in CI). Each comparison alternates the two
/// contenders in one process and reports medians and ratios, since the 2-core machines are shared
/// and noisy.
@main
struct EvanescoBenchmarks: AsyncParsableCommand {
    enum Which: String, CaseIterable, ExpressibleByArgument {
        case all, decode, encode, warp
        case warpPath = "warp-path"
        case align
        case alignBurst = "align-burst"
        case local, kernels, stack
        case backdrop, lens, faces, raw
        case lensOracle = "lens-oracle"
        case queue
    }

    static let configuration = CommandConfiguration(
        commandName: "EvanescoBenchmarks",
        abstract: "Our hot paths against bare libraries and the anchors, alternated in one process.",
        discussion: """
            `all` runs decode, warp, align, lens, local and kernels; the others run alone. `queue` \
            needs EVANESCO_QUEUE=postgres://... (Benchmarks/batch-vs-queue.sh starts a server).

            EXAMPLES:
              EvanescoBenchmarks
              EvanescoBenchmarks warp-path --only homography --repeat 5
              EvanescoBenchmarks encode --repeat 0
            """)

    @Argument(help: "The benchmark to run.")
    var which: Which = .all
    @Option(name: .customLong("repeat"), help: "Alternated runs per comparison (encode: 0 checks the read-back only).")
    var repeats = 9
    @Option(help: "Write every comparison's figures here as JSON.")
    var json: String?
    @Option(help: "The shared folder (data/ and bench/).")
    var shared = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared").path
    @Option(help: "lens-oracle: a folder for the fast and exact renderings of each crop.")
    var save: String?
    @Option(help: "warp-path: only this map (homography, affine, shift); align-burst: only this burst.")
    var only: String?

    func validate() throws {
        guard repeats >= 0 else { throw ValidationError("--repeat must be 0 or more, not \(repeats)") }
    }

    func run() async throws {
        let bench = Bench(repeats: repeats, shared: shared, only: only, save: save)
        print(
            "EvanescoBenchmarks: \(ProcessInfo.processInfo.activeProcessorCount) cores, \(repeats) alternated runs, "
                + "medians"
        )
        let quick: Set<Which> = [.decode, .warp, .align, .lens, .local, .kernels]
        func runs(_ w: Which) -> Bool { which == w || (which == .all && quick.contains(w)) }
        if runs(.decode) { try bench.decode() }
        if runs(.warp) || which == .warpPath { try bench.warp(pathOnly: which == .warpPath) }
        if runs(.align) { try bench.align() }
        if runs(.alignBurst) { try bench.alignBurst() }
        if runs(.backdrop) { try bench.backdrop() }
        if runs(.faces) { try bench.faces() }
        if runs(.raw) {
            try bench.raw()
            bench.rawGather()
            bench.rawDenoise()
        }
        if runs(.lensOracle) { try bench.lensOracle() }
        if runs(.lens) { try bench.lens() }
        if runs(.local) { try bench.local() }
        if runs(.kernels) { try bench.kernels() }
        if runs(.stack) { try bench.stack() }
        if runs(.encode) { try bench.encode() }
        if runs(.queue) { try await bench.queue() }
        if let json {
            try AtomicOutput.write(Array(try JSONEncoder().encode(bench.rows)), to: json, overwrite: true)
        }
    }
}
