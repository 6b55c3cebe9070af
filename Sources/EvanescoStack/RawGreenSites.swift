import CKernels
import EvanescoCore
import Foundation

/// Each frame's green at its red and blue sites (``evn_raw_green_sites``, two samples a cell), for
/// ``RawSampling/colour``: in memory, or in a spill file beside the frames' when they are spilled
/// (in memory if that file cannot be made or written). A frame scaled to a bracket's shortest
/// exposure has none: its missing samples leave it to the plain gather.
final class GreenSites: @unchecked Sendable {
    private enum Store {
        case none
        case memory(UnsafeMutablePointer<UInt16>)
        case spilled(Int)
    }
    private var stores: [Store] = []
    let spill: FrameSpill?

    init(_ frames: [(evn_raw_frame, DisplacementField?)], source: BurstFrameSource, used: [Int]) {
        let w = source.width, h = source.height
        func fill(_ f: evn_raw_frame, _ out: UnsafeMutablePointer<UInt16>) {
            StripExecutor.forEachStrip(rows: h, minimumRows: 16) { rows in
                withUnsafePointer(to: f) {
                    evn_raw_green_sites($0, Int32(rows.lowerBound), Int32(rows.upperBound), out)
                }
            }
        }
        spill = source.spill.flatMap {
            try? FrameSpill(directory: $0.directory, frameBytes: 4 * w * h, slots: frames.count)
        }
        RawMerge.withFrames(frames, source: source, used: used) { pinned in
            for (k, f) in pinned.enumerated() {
                if f.clipped_is_missing != 0 {
                    stores.append(.none)
                    continue
                }
                if let spill {
                    let image = Image<UInt16>(uninitializedWidth: w, height: h, channels: 2) { d in
                        fill(f, d.baseAddress!)
                    }
                    if (try? spill.write(image, slot: k)) != nil {
                        stores.append(.spilled(k))
                        continue
                    }
                }
                let b = UnsafeMutablePointer<UInt16>.allocate(capacity: 2 * w * h)
                fill(f, b)
                stores.append(.memory(b))
            }
        }
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
