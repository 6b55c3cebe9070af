import CKernels
import EvanescoCore
import Foundation

/// Each frame's green at its red and blue sites (``evn_raw_green_sites``, two samples a cell), for
/// ``RawSampling/colour``: in memory, or in a spill file beside the frames' when they are spilled
/// (a file that cannot be made or written is the same error as theirs: in memory, they would
/// exceed the memory limit the frames were spilled for). A frame scaled to a bracket's shortest
/// exposure has none: its missing samples leave it to the plain gather.
final class GreenSites: @unchecked Sendable {
    private enum Store {
        case none
        case memory(UnsafeMutablePointer<UInt16>)
        case spilled(Int)
    }
    private var stores: [Store] = []
    let spill: FrameSpill?

    init(_ frames: [(evn_raw_frame, DisplacementField?)], source: BurstFrameSource, used: [Int]) throws {
        let w = source.width, h = source.height
        func fill(_ f: evn_raw_frame, _ out: UnsafeMutablePointer<UInt16>) {
            StripExecutor.forEachStrip(rows: h, minimumRows: 16) { rows in
                withUnsafePointer(to: f) {
                    evn_raw_green_sites($0, Int32(rows.lowerBound), Int32(rows.upperBound), out)
                }
            }
        }
        spill = try source.spill.map {
            try FrameSpill(directory: $0.directory, frameBytes: 4 * w * h, slots: frames.count)
        }
        let written: Result<Void, Error> = RawMerge.withFrames(frames, source: source, used: used) { pinned in
            Result {
                for (k, f) in pinned.enumerated() {
                    if f.clipped_is_missing != 0 {
                        stores.append(.none)
                        continue
                    }
                    if let spill {
                        let image = Image<UInt16>(uninitializedWidth: w, height: h, channels: 2) { d in
                            fill(f, d.baseAddress!)
                        }
                        try spill.write(image, slot: k)
                        stores.append(.spilled(k))
                        continue
                    }
                    let b = UnsafeMutablePointer<UInt16>.allocate(capacity: 2 * w * h)
                    fill(f, b)
                    stores.append(.memory(b))
                }
            }
        }
        try written.get()
    }

    /// Frame k's samples (valid while this lives), or nil where it has none.
    func pointer(_ k: Int) -> UnsafePointer<UInt16>? {
        switch stores[k] {
        case .none: nil
        case .memory(let b): UnsafePointer(b)
        case .spilled(let slot): spill?.samples(slot, as: UInt16.self)
        }
    }

    deinit {
        for case .memory(let b) in stores { b.deallocate() }
    }
}
