import Dispatch
import EvanescoAlign
import EvanescoCore
import EvanescoIO
import Foundation

/// How frames are registered to the reference.
public enum AlignMode: String, Sendable, Codable, CaseIterable {
    /// Homography, falling back to translation (with the reason in the report) when it fails.
    case auto
    /// Frames are used as they are (a tripod burst).
    case none
    case translation
    case homography
}

/// One frame of a burst, decoded.
public struct BurstFrame: Sendable {
    public var name: String
    public var image: AnyImage
    public var metadata: ImageMetadata
    public init(name: String, image: AnyImage, metadata: ImageMetadata = ImageMetadata()) {
        self.name = name; self.image = image; self.metadata = metadata
    }
}

/// What happened to one frame, in the report schema of ../shared/bench (plus our own keys).
public struct FrameReport: Sendable, Codable {
    public var index: Int
    public var source: String
    /// Maps this frame's pixel coordinates to the reference's, row-major; nil if not aligned.
    public var homography: [[Double]]?
    public var used: Bool
    /// "reference", "aligned", "as is", or "failed: <reason>".
    public var status: String
    public var model: String?
    public var fallback: String?
    public var residual: Double?
    public var inlierFraction: Double?
    public var gain: Double?
    public var correlation: Double?
    /// Seconds spent aligning this frame (pyramid + registration).
    public var alignSeconds: Double?
}

/// Progress of a long stage, for a bar or a log line.
public struct StackProgress: Sendable {
    public var stage: String
    public var done: Int
    public var total: Int
    public var elapsed: Double
    public var remaining: Double? { done > 0 && done < total ? elapsed / Double(done) * Double(total - done) : nil }
}

public struct StackOptions: Sendable {
    public var align: AlignMode = .auto
    public var merge: MergeMethod = .robust
    /// Index (in input order) of the reference frame; the output is in its coordinates.
    public var reference = 0
    /// Interpolation of the warp into the reference: Catmull-Rom by default (sharper than
    /// bilinear and free of the phase shift of a = -0.75 bicubic).
    public var interpolation: Interpolation = .catmullRom
    /// Sigma-clip and robust kappa.
    public var kappa: Float = 2.5
    /// Winsorized: fraction replaced at each end.
    public var winsorFraction: Float = 0.2
    public var registration = RegistrationOptions()
    /// Known registrations (frame -> reference), by frame index, instead of aligning: e.g. from
    /// an earlier report, or ground truth. nil entries mark frames to leave out.
    public var givenHomographies: [Homography?]?
    public var progress: (@Sendable (StackProgress) -> Void)?
    public init() {}
}

public enum StackError: Error, CustomStringConvertible, Equatable {
    case noFrames
    case referenceOutOfRange(Int, count: Int)
    case sizeMismatch(frame: String, size: String, reference: String, referenceSize: String)
    case channelMismatch(frame: String)

    public var description: String {
        switch self {
        case .noFrames: "no usable frames; give image files, a folder of images or one video"
        case .referenceOutOfRange(let r, let n): "--reference \(r) is out of range: there are \(n) usable frames (0...\(n - 1))"
        case .sizeMismatch(let f, let s, let r, let rs): "\(f) is \(s) but the reference \(r) is \(rs); all frames of a burst must have the same size (crop or resize them first)"
        case .channelMismatch(let f): "\(f) has a different number of colour channels from the reference; convert the burst to one colour type first"
        }
    }
}

/// The merged picture and everything measured on the way.
public struct StackResult: Sendable {
    public var image: AnyImage
    public var frames: [FrameReport]
    /// Seconds per stage: align, warp, merge and their fused total "warp+merge" (warp and merge
    /// run tile by tile together; their wall time is split by their shares of thread time).
    /// Decode and encode are the caller's.
    public var timings: [String: Double]
    public var merge: MergeMethod
    public var align: AlignMode
    /// Burst-wide noise estimate (sample units) used by the robust merge.
    public var noiseSigma: Float?
    public var referenceIndex: Int
    public var usedFrames: Int { frames.filter(\.used).count }
}

public enum BurstStacker {
    /// Aligns `frames` to the reference and merges them. Frames that cannot be aligned are
    /// reported and left out; a burst of one frame returns that frame.
    public static func stack(_ frames: [BurstFrame], options: StackOptions = StackOptions()) throws -> StackResult {
        guard !frames.isEmpty else { throw StackError.noFrames }
        guard options.reference >= 0 && options.reference < frames.count else {
            throw StackError.referenceOutOfRange(options.reference, count: frames.count)
        }
        let ref = frames[options.reference]
        for f in frames {
            if f.image.width != ref.image.width || f.image.height != ref.image.height {
                throw StackError.sizeMismatch(frame: f.name, size: "\(f.image.width)x\(f.image.height)",
                                              reference: ref.name, referenceSize: "\(ref.image.width)x\(ref.image.height)")
            }
            if f.image.channels != ref.image.channels { throw StackError.channelMismatch(frame: f.name) }
        }
        var timings: [String: Double] = [:]
        let t0 = Date()
        let reports = align(frames, options: options)
        timings["align"] = Date().timeIntervalSince(t0)
        let t1 = Date()
        let used = reports.filter(\.used).map(\.index)
        let homographies: [Homography?] = used.map { i in reports[i].homography.map { Homography(rows: $0) } }
        let result: (AnyImage, Float?)
        let split = LockedBox((warp: UInt64(0), kernel: UInt64(0)))
        switch ref.image {
        case .uint8:
            let r = merge(used.map { frames[$0].image.uint8 }, homographies, options: options, threadTime: split)
            result = (.uint8(r.0), r.1)
        case .uint16, .float32:
            let r = merge(used.map { frames[$0].image.uint16 }, homographies, options: options, threadTime: split)
            result = (.uint16(r.0), r.1)
        }
        // Warping and merging run fused, tile by tile; their wall time is split by their shares
        // of the threads' time.
        let fused = Date().timeIntervalSince(t1), (warp, kernel) = split.value
        let warpShare = warp + kernel > 0 ? Double(warp) / Double(warp + kernel) : 0
        timings["warp"] = fused * warpShare
        timings["merge"] = fused * (1 - warpShare)
        timings["warp+merge"] = fused
        return StackResult(image: result.0, frames: reports, timings: timings, merge: options.merge, align: options.align,
                           noiseSigma: result.1, referenceIndex: options.reference)
    }

    // MARK: Alignment

    static func align(_ frames: [BurstFrame], options: StackOptions) -> [FrameReport] {
        let refIndex = options.reference
        var reports = frames.enumerated().map { i, f in
            FrameReport(index: i, source: f.name, homography: i == refIndex ? Homography.identity.rows : nil,
                        used: i == refIndex, status: i == refIndex ? "reference" : "pending")
        }
        if let given = options.givenHomographies {
            for i in reports.indices where i != refIndex {
                if i < given.count, let h = given[i] {
                    reports[i].homography = h.rows; reports[i].used = true; reports[i].status = "given"
                } else {
                    reports[i].status = "failed: no homography given for this frame"
                }
            }
            return reports
        }
        if options.align == .none {
            for i in reports.indices where i != refIndex {
                reports[i].homography = Homography.identity.rows; reports[i].used = true; reports[i].status = "as is"
            }
            return reports
        }
        guard frames.count > 1 else { return reports }
        let refStart = Date()
        let reference: RegistrationReference
        switch frames[refIndex].image {
        case .uint8(let i): reference = RegistrationReference(i, options: options.registration)
        case .uint16(let i): reference = RegistrationReference(i, options: options.registration)
        case .float32(let i): reference = RegistrationReference(i, options: options.registration)
        }
        reports[refIndex].alignSeconds = (Date().timeIntervalSince(refStart) * 1000).rounded() / 1000
        let others = frames.indices.filter { $0 != refIndex }
        let box = LockedBox(reports)
        let start = Date()
        let done = LockedBox(0)
        for n in 0..<others.count {
            let i = others[n]
            let frameStart = Date()
            let pyramid: GreyPyramid
            switch frames[i].image {
            case .uint8(let img): pyramid = reference.framePyramid(img)
            case .uint16(let img): pyramid = reference.framePyramid(img)
            case .float32(let img): pyramid = reference.framePyramid(img)
            }
            var r = FrameReport(index: i, source: frames[i].name, homography: nil, used: false, status: "pending")
            let primary: MotionModel = options.align == .translation ? .translation : .homography
            do {
                let res = try reference.register(pyramid: pyramid, model: primary)
                r.fill(res, status: "aligned")
            } catch {
                if options.align == .auto {
                    do {
                        let res = try reference.register(pyramid: pyramid, model: .translation)
                        r.fill(res, status: "aligned")
                        r.fallback = "homography failed (\(error)); used translation"
                    } catch let e2 {
                        r.status = "failed: \(e2)"
                    }
                } else {
                    r.status = "failed: \(error)"
                }
            }
            r.alignSeconds = (Date().timeIntervalSince(frameStart) * 1000).rounded() / 1000
            box.update { $0[i] = r }
            let d = done.update { $0 += 1; return $0 }
            options.progress?(StackProgress(stage: "align", done: d, total: others.count, elapsed: Date().timeIntervalSince(start)))
        }
        return box.value
    }

    // MARK: Merge

    /// Streams the merge over tiles: for each row segment every frame is warped into a small
    /// buffer and merged at once, so no warped frame is ever held whole.
    static func merge<S: PixelSample>(_ images: [Image<S>], _ homographies: [Homography?], options: StackOptions,
                                      threadTime: LockedBox<(warp: UInt64, kernel: UInt64)>? = nil) -> (Image<S>, Float?) {
        let w = images[0].width, h = images[0].height, c = images[0].channels, n = images.count
        let warpers = zip(images, homographies).map { TileWarper(frame: $0, registration: $1, interpolation: options.interpolation) }
        let network = SortingNetwork(size: n)
        var sigma: Float? = nil
        let kernel: any MergeKernel
        switch options.merge {
        case .mean: kernel = MeanKernel()
        case .median: kernel = MedianKernel(network: network)
        case .sigmaClip: kernel = SigmaClipKernel(network: network, kappa: options.kappa)
        case .winsorized: kernel = WinsorizedKernel(network: network, fraction: options.winsorFraction)
        case .mode: kernel = ModeKernel(network: network, fullScale: S.fullScale)
        case .robust:
            let s = estimateNoise(warpers, width: w, height: h, channels: c, network: network)
            sigma = s
            kernel = SigmaClipKernel(network: network, kappa: options.kappa, burstNoise: s)
        }
        let tileWidth = max(64, 4096 / max(1, n) / c * 8)   // ~32 K floats per frame-stack tile
        let start = Date()
        let rowsDone = LockedBox(0)
        let out = Image<S>(width: w, height: h, channels: c) { dst in
            StripExecutor.forEachStrip(rows: h, minimumRows: 8) { rows in
                let tile = SampleTile.allocate(frames: n, maxPixels: tileWidth, channels: c)
                defer { tile.deallocate() }
                let merged = UnsafeMutablePointer<Float>.allocate(capacity: tileWidth * c)
                defer { merged.deallocate() }
                var warpNs: UInt64 = 0, kernelNs: UInt64 = 0
                defer { threadTime?.update { $0.warp += warpNs; $0.kernel += kernelNs } }
                for y in rows {
                    var x0 = 0
                    while x0 < w {
                        let x1 = min(w, x0 + tileWidth)
                        let t = tile.resized(pixels: x1 - x0)
                        let c0 = DispatchTime.now().uptimeNanoseconds
                        for k in 0..<n {
                            warpers[k].sampleRow(y: y, x0: x0, x1: x1, into: t.values + k * t.stride, valid: t.valid + k * t.pixels, block: t.warpBlock)
                        }
                        let c1 = DispatchTime.now().uptimeNanoseconds
                        t.countValid()
                        kernel.merge(t, into: merged)
                        let c2 = DispatchTime.now().uptimeNanoseconds
                        warpNs += c1 - c0; kernelNs += c2 - c1
                        let o = (y * w + x0) * c
                        for j in 0..<t.length { dst[o + j] = S(clampingRounded: merged[j]) }
                        x0 = x1
                    }
                    if let progress = options.progress {
                        let d = rowsDone.update { $0 += 1; return $0 }
                        if d % 64 == 0 || d == h { progress(StackProgress(stage: "merge", done: d, total: h, elapsed: Date().timeIntervalSince(start))) }
                    }
                }
            }
        }
        return (out, sigma)
    }

    /// Burst-wide noise sigma (sample units): 1.4826 x the median, over sampled pixels, of each
    /// sample's median absolute deviation across frames. Moving things are a minority of frames
    /// at most pixels, so the median of MADs reflects sensor and compression noise.
    static func estimateNoise<S>(_ warpers: [TileWarper<S>], width w: Int, height h: Int, channels c: Int, network: SortingNetwork) -> Float {
        let n = warpers.count
        guard n >= 3 else { return S.fullScale / 255 * 2 }
        let tile = SampleTile.allocate(frames: n, maxPixels: 256, channels: c)
        defer { tile.deallocate() }
        var mads: [Float] = []
        var dev: [Float] = []
        dev.reserveCapacity(n)
        let stepY = max(1, h / 48)
        for y in stride(from: stepY / 2, to: h, by: stepY) {
            for x0 in stride(from: 0, to: max(1, w - 256), by: max(256, w / 8)) {
                let t = tile.resized(pixels: min(256, w - x0))
                for k in 0..<n { warpers[k].sampleRow(y: y, x0: x0, x1: x0 + t.pixels, into: t.values + k * t.stride, valid: t.valid + k * t.pixels) }
                t.countValid()
                t.copyForSorting(into: t.scratch)
                t.sort(t.scratch, network)
                for j in 0..<t.length where t.counts[j] >= 3 {
                    let m = t.median(sorted: t.scratch, j)
                    dev.removeAll(keepingCapacity: true)
                    for k in 0..<Int(t.counts[j]) { dev.append(abs(t.scratch[k * t.stride + j] - m)) }
                    dev.sort()
                    mads.append(dev[dev.count / 2])
                }
            }
        }
        guard !mads.isEmpty else { return S.fullScale / 255 * 2 }
        mads.sort()
        return max(S.fullScale / 255 * 0.5, 1.4826 * mads[mads.count / 2])
    }
}

extension FrameReport {
    mutating func fill(_ r: RegistrationResult, status: String) {
        homography = r.homography.rows
        used = true
        self.status = status
        model = r.model.rawValue
        residual = (r.residual * 1000).rounded() / 1000
        inlierFraction = (r.inlierFraction * 1000).rounded() / 1000
        gain = (r.gain * 10000).rounded() / 10000
        correlation = (r.correlation * 10000).rounded() / 10000
    }
}

