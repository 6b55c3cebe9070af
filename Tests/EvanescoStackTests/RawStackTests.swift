import Foundation
import CKernels
import Testing
import EvanescoCore
@testable import EvanescoIO
@testable import EvanescoStack

/// Raw bursts stacked on the sensor's samples: known answers on mosaics the tests make.
@Suite struct RawStackTests {
    /// A folder of DNG frames, removed afterwards.
    final class Burst {
        let path = NSTemporaryDirectory() + "evanesco-rawstack-\(UUID().uuidString)"
        var files: [String] = []
        init(_ frames: [RawMosaic]) throws {
            try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
            for (k, f) in frames.enumerated() {
                let file = path + "/f\(k < 10 ? "0" : "")\(k).dng"
                try DNGWriter.write(f, to: file)
                files.append(file)
            }
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }
    }

    /// A textured scene sampled by a mosaic, the scene moved by (dx, dy) photosites; each 2x2 site
    /// adds its own offset, so a frame read at the wrong phase shows. `square` paints a bright
    /// 24 x 24 block at that position.
    static func mosaic(
        width: Int = 256, height: Int = 192, cfa: CFAPattern = .rggb, dx: Float = 0, dy: Float = 0,
        square: (Int, Int)? = nil, noise: ((Int) -> Float)? = nil, fine: Float = 0
    ) -> RawMosaic {
        let samples = Image<UInt16>(width: width, height: height, channels: 1) { d in
            for y in 0..<height {
                for x in 0..<width {
                    let u = Float(x) - dx, v = Float(y) - dy
                    // Incommensurate waves and a slope: no shift but the true one matches it.
                    var s = 1200 + 500 * sinf(u * 0.21) * cosf(v * 0.17) + 400 * sinf((u + 2 * v) * 0.043)
                    s += 300 * sinf(u * 0.071 - v * 0.113) + 2 * u - v
                    s += Float(cfa.color(x: x, y: y)) * 150
                    // Without `fine`, each site's own offset; with it, detail finer than a colour
                    // plane's samples resolve (its two greens alike, as a sensor's are).
                    s += fine == 0 ? Float((y & 1) * 2 + (x & 1)) * 37 : fine * sinf(u * 0.9 + v * 0.55)
                    if let (sx, sy) = square, (sx..<(sx + 24)).contains(x), (sy..<(sy + 24)).contains(y) { s = 3900 }
                    s += noise?(y * width + x) ?? 0
                    d[y * width + x] = UInt16(clampingRounded: s)
                }
            }
        }
        var capture = RawCapture()
        capture.make = "Evanesco"
        capture.model = "Test"
        capture.uniqueCameraModel = "Evanesco Test"
        capture.iso = 400
        capture.exposureTime = 0.01
        return RawMosaic(
            samples: samples, layout: .bayer(cfa), blackLevels: [256], whiteLevel: 4095,
            color: RawColor(
                colorMatrix: [0.7, -0.2, -0.1, -0.45, 1.25, 0.15, -0.08, 0.16, 0.53], asShotNeutral: [0.45, 1, 0.66]),
            noise: NoiseModel(planes: [NoiseModelPlane(scale: noiseScale, offset: noiseOffset)]), capture: capture)
    }

    /// Options that test the merge itself: the spatial denoise after it off (RawDenoiseTests test
    /// it). These frames are noiseless but declare a camera's noise, which the denoise would rightly
    /// take their smoother texture for.
    static func mergeOnly() -> StackOptions {
        var o = StackOptions()
        o.rawDenoise = 0
        return o
    }

    /// The samples of `raw` as the merge scales them (``RawPlanes``).
    static func scaled(_ raw: RawMosaic) -> [UInt16] {
        raw.samples.samples.map { UInt16((Double($0) * 65535 / Double(raw.whiteLevel)).rounded()) }
    }

    // Sizes whose plane rows do not split into strips on multiples of 8 (the Wiener pass hands
    // the vote its rows by bands of 8), odd ones too.
    @Test(arguments: [
        (CFAPattern.rggb, 256, 192), (.bggr, 250, 202), (.grbg, 246, 167), (.gbrg, 263, 142)
    ])
    func identicalFramesMergeToTheFrame(cfa: CFAPattern, width: Int, height: Int) throws {
        let frame = Self.mosaic(width: width, height: height, cfa: cfa)
        let burst = try Burst(Array(repeating: frame, count: 4))
        for sampling in RawSampling.allCases {
            var o = Self.mergeOnly()
            o.rawSampling = sampling
            let r = try BurstStacker.stack(contentsOf: burst.files, options: o)
            let m = try #require(r.raw).mosaic
            #expect(m.cfa == cfa)
            #expect(m.width == frame.width && m.height == frame.height)
            // Every photosite is the frame's own sample, at its own phase (each site's offset
            // shows a swapped plane), scaled to 16 bits with the levels.
            #expect(m.samples.samples == ContiguousArray(Self.scaled(frame)), "\(sampling)")
            #expect(abs(m.whiteLevel - 65535) < 0.5)
            #expect(abs(m.blackLevels[0] - 256 * 65535 / 4095) < 0.01)
            #expect(r.usedFrames == 4)
        }
    }

    /// The level of ``flat(_:)``'s frames and the noise line of ``mosaic(width:height:cfa:dx:dy:square:noise:fine:)``.
    static let flatLevel: Float = 1500, noiseScale = 4e-4, noiseOffset = 2e-6

    /// A flat frame at ``flatLevel`` with the model's noise (Gaussian, from `seed`).
    static func flat(_ seed: UInt64) -> RawMosaic {
        let range: Float = 4095 - 256, x = Double((flatLevel - 256) / range)
        let sigmaDN = Float((noiseScale * x + noiseOffset).squareRoot()) * range
        var g = SplitMix(seed: seed)
        var m = Self.mosaic()
        // Flat: the texture replaced by one level, with the noise.
        m.samples = Image(width: m.width, height: m.height, channels: 1) { d in
            for i in 0..<d.count { d[i] = UInt16(clampingRounded: flatLevel + g.gaussian() * sigmaDN) }
        }
        return m
    }

    /// The variance of a mosaic's samples, in 16-bit units when `scaled`.
    static func variance(_ m: RawMosaic, scaled: Bool = false) -> Double {
        let v = m.samples.samples.map(Double.init), mean = v.reduce(0, +) / Double(v.count)
        let k = scaled ? Double(RawPlanes.scale(white: m.whiteLevel)) : 1
        return v.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / Double(v.count - 1) * k * k
    }

    /// Flat frames with the model's noise: the merged variance is the frame's over N, and the
    /// merged DNG's NoiseProfile says so.
    @Test func noiseVarianceFallsAsOneOverN() throws {
        let single = Self.variance(Self.flat(1), scaled: true)
        for n in [4, 16] {
            let burst = try Burst((0..<n).map { Self.flat(UInt64($0 + 1)) })
            var o = Self.mergeOnly()
            o.align = .none
            let r = try BurstStacker.stack(contentsOf: burst.files, options: o)
            let m = try #require(r.raw)
            let ratio = Self.variance(m.mosaic) * Double(n) / single
            #expect(ratio > 0.85 && ratio < 1.15, "N = \(n): variance x N / one frame's = \(ratio)")
            let p = try #require(m.mosaic.noise).plane(1)
            #expect(
                abs(p.scale - Self.noiseScale / Double(n)) < 1e-9
                    && abs(p.offset - Self.noiseOffset / Double(n)) < 1e-12)
            #expect(m.noiseSource.contains("NoiseProfile"))
        }
    }

    @Test(arguments: RawSampling.allCases)
    func movingSquareVanishes(sampling: RawSampling) throws {
        let clean = Self.mosaic()
        let frames = (0..<7).map { k in Self.mosaic(square: (20 + 30 * k, 80)) }
        let burst = try Burst(frames)
        var o = Self.mergeOnly()
        o.rawSampling = sampling
        let r = try BurstStacker.stack(contentsOf: burst.files, options: o)
        let m = try #require(r.raw).mosaic
        let want = Self.scaled(clean)
        var worst = 0, at = 0
        for i in want.indices where abs(Int(m.samples.samples[i]) - Int(want[i])) > worst {
            worst = abs(Int(m.samples.samples[i]) - Int(want[i]))
            at = i
        }
        // The square (3900 DN, ~2000 above the scene) is in one frame of seven at each place.
        #expect(
            worst <= 16,
            "largest difference from the clean scene: \(worst) (16-bit units) at \(at % m.width), \(at / m.width)")
    }

    /// A robust vote's parameters over `n` four-channel frames, the first the reference, kappa 3,
    /// the noise line 2 v + 400 in every channel.
    static func voteParameters(frames n: Int) -> evn_raw_merge_params {
        var p = evn_raw_merge_params()
        (p.frames, p.channels, p.method, p.kappa, p.reference) = (Int32(n), 4, 1, 3, 0)
        p.slope = (2, 2, 2, 2)
        p.intercept = (400, 400, 400, 400)
        return p
    }

    /// A vote buffer's first 2n rows (`stride` apart): frame k's values of cell i, channel ch, then
    /// its weights, the same for a cell's four channels.
    static func fill(
        _ buffer: UnsafeMutablePointer<Float>, frames n: Int, count: Int, stride: Int,
        value: (Int, Int, Int) -> Float, weight: (Int, Int) -> Float
    ) {
        for k in 0..<n {
            for i in 0..<count {
                for ch in 0..<4 {
                    buffer[k * stride + i * 4 + ch] = value(k, i, ch)
                    buffer[(n + k) * stride + i * 4 + ch] = weight(k, i)
                }
            }
        }
    }

    // The vote replaces, in the rows it read, the values of a frame far from it (more than
    // replace_beyond times its limit: something moved) by the merged ones, so that the Wiener
    // merge reading them next never sees what moved. A frame only a little off (turned away by
    // the vote but within twice its limit, as where a gather softened an edge) keeps its own, and
    // so does the reference, always. A frame's samples of weight 0 (it does not cover the site)
    // take the reference's (evn_raw_wiener_fill's work). Without replace_beyond nothing is replaced.
    @Test(arguments: [Float(2), 0])
    func theVoteReplacesWhatMovedForTheWienerMerge(replaceBeyond: Float) {
        let n = 5, count = 64
        var p = Self.voteParameters(frames: n)
        p.replace_beyond = replaceBeyond
        // Noise at 4000: 2 x 4000 + 400; the other frames agree exactly, so the vote's limit is
        // 3 sigma, 275 units.
        func value(_ k: Int, _ i: Int, _ ch: Int) -> Float {
            if k == 3 && (10..<20).contains(i) { return 7000 }
            if k == 4 && (30..<40).contains(i) && ch == 1 { return 4400 }
            if k == 0 && (50..<60).contains(i) { return 7000 }
            if k == 2 && (52..<56).contains(i) { return 9999 }
            return 4000
        }
        // Frame 2 does not cover cells 52 ..< 56, where the reference stands 3000 off the vote.
        let missing = { (k: Int, i: Int) in k == 2 && (52..<56).contains(i) }
        let scratch = VoteScratch(p, frames: n, segment: count)
        scratch.buffers.borrow { buffer in
            let stride = scratch.stride
            Self.fill(buffer, frames: n, count: count, stride: stride, value: value) { k, i in missing(k, i) ? 0 : 1 }
            RawMerge.voteSegment(
                scratch.params, frames: n, count: count, stride: stride, buffer: buffer, network: scratch.network,
                kept: nil, best: nil)
            let merged = buffer + 4 * n * stride
            #expect((0..<(count * 4)).allSatisfy { merged[$0] == 4000 })
            for k in 0..<n {
                for i in 0..<count {
                    for ch in 0..<4 {
                        let replaced = replaceBeyond > 0 && k == 3 && (10..<20).contains(i)
                        let filled = replaceBeyond > 0 && missing(k, i)
                        let want = replaced ? 4000 : filled ? value(0, i, ch) : value(k, i, ch)
                        #expect(buffer[k * stride + i * 4 + ch] == want, "frame \(k), cell \(i), channel \(ch)")
                    }
                }
            }
        }
    }

    // The reference's distance from the vote, in units of the frames' noise and disagreement
    // ((limit / kappa)^2), the mean over its channels: four frames agree exactly at 4000 (noise
    // 2 x 4000 + 400, spread 0), so the reference 2 deviations off in one channel is 1 unit, 1
    // deviation off in every channel 1 unit, at the vote 0, and where it covers nothing 0. Its
    // signed distance per channel (limit / kappa, 127 for EVN_RAW_OFFSET_RANGE): +2 in the one
    // channel and 0 in the others, -1 in every channel, 0 at the vote and where it covers nothing;
    // 6 deviations off in every channel is 36 units of distance, and its signed distance is held
    // at the range.
    @Test func theVoteSaysHowFarTheReferenceLies() {
        let n = 5, count = 64
        let p = Self.voteParameters(frames: n)
        let sd = Float(2 * 4000 + 400).squareRoot()
        func value(_ k: Int, _ i: Int, _ ch: Int) -> Float {
            guard k == 0 else { return 4000 }
            if i < 16 { return ch == 0 ? 4000 + 2 * sd : 4000 }
            if i < 32 { return 4000 - sd }
            if i == 40 { return 4000 - 6 * sd }
            return 4000
        }
        let scratch = VoteScratch(p, frames: n, segment: count)
        var deviation = [Float](repeating: -1, count: count)
        var offset = [Int8](repeating: -100, count: 4 * count)
        scratch.buffers.borrow { buffer in
            let stride = scratch.stride
            Self.fill(buffer, frames: n, count: count, stride: stride, value: value) { k, i in
                k == 0 && i >= 48 ? 0 : 1
            }
            deviation.withUnsafeMutableBufferPointer { d in
                offset.withUnsafeMutableBufferPointer { o in
                    RawMerge.voteSegment(
                        scratch.params, frames: n, count: count, stride: stride, buffer: buffer,
                        network: scratch.network, kept: nil, best: nil, deviation: d.baseAddress,
                        offset: o.baseAddress)
                }
            }
        }
        for i in 0..<count {
            let want: Float = i < 32 ? 1 : i == 40 ? 36 : 0
            #expect(abs(deviation[i] - want) < 1e-3, "cell \(i): \(deviation[i])")
        }
        let unit = Float(127) / Float(EVN_RAW_OFFSET_RANGE)
        for i in 0..<count {
            for ch in 0..<4 {
                let want: Float =
                    i < 16 ? (ch == 0 ? 2 : 0) : i < 32 ? -1 : i == 40 ? -Float(EVN_RAW_OFFSET_RANGE) : 0
                #expect(abs(Float(offset[i * 4 + ch]) - want * unit) <= 0.5, "cell \(i), channel \(ch)")
            }
        }
    }

    @Test(arguments: RawSampling.allCases)
    func wholeCellShiftIsUndone(sampling: RawSampling) throws {
        // The scene moved by one cell (2 photosites) each frame: alignment on the planes finds
        // it, and the reference's photosites get the same scene back, at their own phases.
        let frames = (0..<5).map { k in Self.mosaic(dx: Float(2 * k), dy: Float(-2 * k)) }
        let burst = try Burst(frames)
        var o = Self.mergeOnly()
        o.rawSampling = sampling
        let r = try BurstStacker.stack(contentsOf: burst.files, options: o)
        let m = try #require(r.raw).mosaic
        let want = Self.scaled(frames[0])
        var worst = 0
        for y in 24..<(m.height - 24) {
            for x in 24..<(m.width - 24) {
                worst = max(worst, abs(Int(m.samples.samples[y * m.width + x]) - Int(want[y * m.width + x])))
            }
        }
        #expect(worst <= 64, "largest difference inside: \(worst) (16-bit units, 1/16 DN each)")
        // The report's homographies are in photosites: frame k moved by (2k, -2k).
        let h = try #require(r.frames[2].homography)
        #expect(abs(h.m[2] + 4) < 0.05 && abs(h.m[5] - 4) < 0.05, "\(h)")
    }

    /// HDR+'s merge: identical frames give the frame back (every frame's tile is the reference's),
    /// and a square in the reference only stays, as the reference shows it, where the robust
    /// merge removes it.
    @Test func hdrplusIsFaithfulToTheReference() throws {
        var o = StackOptions()
        o.merge = .hdrplus
        let frame = Self.mosaic(cfa: .grbg)
        let same = try Burst(Array(repeating: frame, count: 3))
        let r = try BurstStacker.stack(contentsOf: same.files, options: o)
        let m = try #require(r.raw).mosaic
        let want = Self.scaled(frame)
        var worst = 0
        for i in want.indices { worst = max(worst, abs(Int(m.samples.samples[i]) - Int(want[i]))) }
        #expect(worst <= 1, "identical frames: largest difference \(worst)")

        let frames = [Self.mosaic(square: (100, 80))] + (1..<5).map { _ in Self.mosaic() }
        let burst = try Burst(frames)
        let kept = try #require(try BurstStacker.stack(contentsOf: burst.files, options: o).raw).mosaic
        let removed = try #require(try BurstStacker.stack(contentsOf: burst.files).raw).mosaic
        let inside = 90 * m.width + 110  // a photosite inside the square
        #expect(abs(Int(kept.samples.samples[inside]) - Int(Self.scaled(frames[0])[inside])) < 700)
        #expect(abs(Int(removed.samples.samples[inside]) - Int(Self.scaled(frames[1])[inside])) < 64)
    }

    /// A raw burst read back from a spill file merges to the same mosaic as in memory, for the
    /// blended robust merge and for HDR+'s: both drop the file's pages from the process every few
    /// rows while their threads read it (a one-byte limit: every 16 rows here, 6 times a thread).
    @Test(arguments: [(MergeMethod.robust, RawSampling.sites), (.hdrplus, .sites), (.robust, .colour)])
    func spilledRawBurstMergesAsInMemory(merge: MergeMethod, sampling: RawSampling) throws {
        let frames = (0..<6).map { k in
            Self.mosaic(dx: Float(k % 3) * 0.7, dy: Float(k / 3) * 0.9, square: (20 + 30 * k, 80))
        }
        let burst = try Burst(frames)
        var o = StackOptions()
        o.merge = merge
        o.rawSampling = sampling
        o.memoryLimit = nil
        let memory = try #require(try BurstStacker.stack(contentsOf: burst.files, options: o).raw).mosaic
        o.memoryLimit = 1
        o.spillDirectory = burst.path
        let r = try BurstStacker.stack(contentsOf: burst.files, options: o)
        #expect((r.spilledBytes ?? 0) >= 6 * 256 * 192 * 2)
        // 96 rows of cells, 32 a band: whatever the threads, at least three drops and the last.
        #expect((r.spillReleases ?? 0) >= 4, "the merge dropped the file's pages \(r.spillReleases ?? 0) times")
        let spilled = try #require(r.raw).mosaic
        #expect(spilled.samples == memory.samples, "the spilled burst's mosaic differs from the in-memory one")
    }

    @Test func hdrplusRefusesPictures() throws {
        var o = StackOptions()
        o.merge = .hdrplus
        let frames = (0..<3).map {
            BurstFrame(name: "f\($0)", image: .uint8(Image<UInt8>(width: 64, height: 64, channels: 3)))
        }
        #expect(throws: StackError.hdrplusNeedsBayerRaw) { try BurstStacker.stack(frames, options: o) }
    }

    @Test func oddFrameIsNamed() throws {
        var other = Self.mosaic()
        other.capture.uniqueCameraModel = "Another Camera"
        let burst = try Burst([Self.mosaic(), Self.mosaic(), other])
        #expect {
            try BurstStacker.stack(contentsOf: burst.files)
        } throws: { e in
            guard case .rawFrameMismatch(let f, let what, _) = e as? StackError else { return false }
            return f.hasSuffix("f02.dng") && what.contains("Another Camera")
        }
        // Beyond 6 stops a frame is refused, not scaled.
        var far = Self.mosaic()
        far.capture.exposureTime = 1.28
        let b2 = try Burst([Self.mosaic(), far])
        #expect {
            try BurstStacker.stack(contentsOf: b2.files)
        } throws: { e in
            guard case .rawFrameMismatch(let f, let what, _) = e as? StackError else { return false }
            return f.hasSuffix("f01.dng") && what.contains("more than 6 stops longer")
        }
        // A frame that does not say its exposure cannot be scaled with the others.
        var longer = Self.mosaic(), unknown = Self.mosaic()
        longer.capture.exposureTime = 0.02
        unknown.capture.exposureTime = 0
        let b3 = try Burst([Self.mosaic(), longer, unknown])
        #expect {
            try BurstStacker.stack(contentsOf: b3.files)
        } throws: { e in
            guard case .rawFrameMismatch(let f, let what, _) = e as? StackError else { return false }
            return f.hasSuffix("f02.dng") && what.contains("not given")
        }
    }

    /// `frame` exposed `times` as long: black + (v - black) x times, clipped at white.
    static func exposed(_ frame: RawMosaic, times: Float) -> RawMosaic {
        var m = frame
        let black = frame.blackLevels[0], white = frame.whiteLevel
        m.samples = Image(width: frame.width, height: frame.height, channels: 1) { d in
            for (i, v) in frame.samples.samples.enumerated() {
                d[i] = UInt16(clampingRounded: min(white, black + (Float(v) - black) * times))
            }
        }
        m.capture.exposureTime = frame.capture.exposureTime * times
        return m
    }

    // A bracket without noise or motion: the longer frames, scaled back, give the reference's
    // samples wherever they did not clip, and nothing where they did (the bright square and the
    // crests of the waves at 4x). Registered as they are (identity), the merge is the reference
    // to the bit, highlights included; counting the clipped samples would pull those sites down.
    // Aligned, the clipped regions must not pull the registration: within 0.01 photosite of the
    // identity, and the merge within half a raw unit of the reference.
    @Test(arguments: [
        (MergeMethod.robust, RawSampling.sites), (.mean, .sites), (.hdrplus, .sites), (.median, .sites),
        (.robust, .colour)
    ])
    func bracketMergesAtTheReferenceExposure(merge: MergeMethod, sampling: RawSampling) throws {
        // A scene above black (a sensor's floor clips the longer frames' dark samples otherwise).
        var reference = Self.mosaic(square: (100, 60))
        reference.samples = Image(width: 256, height: 192, channels: 1) { d in
            for (i, v) in reference.samples.samples.enumerated() { d[i] = max(v, 300) }
        }
        let frames = [
            reference, Self.exposed(reference, times: 2), Self.exposed(reference, times: 4),
            Self.exposed(reference, times: 2)
        ]
        let clipped = frames[2].samples.samples.filter { $0 == 4095 }.count
        #expect(clipped > 2000, "the 4x frame clips \(clipped) samples")
        let burst = try Burst(frames)
        let want = Self.scaled(reference)
        var o = Self.mergeOnly()
        o.merge = merge
        o.rawSampling = sampling
        o.givenHomographies = Array(repeating: .identity, count: 4)
        let given = try BurstStacker.stack(contentsOf: burst.files, options: o)
        let off = zip(try #require(given.raw).mosaic.samples.samples, want).filter { $0 != $1 }.count
        #expect(off == 0, "\(off) photosites differ from the reference's")
        #expect(given.usedFrames == 4)
        #expect(given.notices.contains(.exposureScaled(source: burst.files[2], factor: 0.25)))
        #expect(given.notices.contains(.exposureScaled(source: burst.files[1], factor: 0.5)))
        o.givenHomographies = nil
        let aligned = try BurstStacker.stack(contentsOf: burst.files, options: o)
        for f in aligned.frames {
            let h = try #require(f.homography)
            for (x, y) in [(0.0, 0.0), (256, 0), (0, 192), (256, 192)] {
                let p = try #require(h.apply(x, y))
                #expect(abs(p.x - x) < 0.01 && abs(p.y - y) < 0.01, "\(f.source) moves (\(x), \(y)) to \(p)")
            }
        }
        let worst = zip(try #require(aligned.raw).mosaic.samples.samples, want).map { abs(Int($0) - Int($1)) }.max()
        #expect((worst ?? .max) <= 8, "a photosite is \(worst ?? -1) units of 65535 off the reference's")
    }

    // Scaled to the reference's exposure, a frame exposed twice as long has half the shot noise
    // variance: the mean weighs it twice. Flat frames whose scaled levels differ by 10 raw units
    // give the weighted mean, (1000 + 2 x 1010) / 3, not the plain one.
    @Test func longerFramesWeighMore() throws {
        func flat(_ v: Float, exposure: Float) -> RawMosaic {
            var m = Self.mosaic(width: 64, height: 48)
            m.samples = Image(width: 64, height: 48, channels: 1) { d in
                for i in 0..<(64 * 48) { d[i] = UInt16(v) }
            }
            m.capture.exposureTime = exposure
            return m
        }
        let burst = try Burst([flat(1000, exposure: 0.01), flat(256 + 2 * (1010 - 256), exposure: 0.02)])
        var o = StackOptions()
        o.merge = .mean
        o.givenHomographies = [.identity, .identity]
        let m = try #require(try BurstStacker.stack(contentsOf: burst.files, options: o).raw).mosaic
        let k = 65535.0 / 4095, want = (1000 + 2 * 1010) / 3 * k
        for v in m.samples.samples { #expect(abs(Double(v) - want) <= 1, "\(v), not \(want)") }
    }

    // The reference exposed twice as long as the shortest frame, clipping the bright square and
    // the waves' crests: the merge is at the shortest exposure, where those highlights come from
    // the frames that saw them (here the shortest's samples, to the bit, with the registrations
    // given; hdrplus too, where they stand in for the reference's missing samples), and the DNG's
    // BaselineExposure rises by the stop the reference was exposed over it.
    @Test(arguments: [MergeMethod.robust, .mean, .median, .hdrplus])
    func aBracketKeepsWhatOnlyItsShortestFrameSaw(merge: MergeMethod) throws {
        var short = Self.mosaic(square: (100, 60))
        short.samples = Image(width: 256, height: 192, channels: 1) { d in
            for (i, v) in short.samples.samples.enumerated() { d[i] = max(v, 300) }
        }
        let reference = Self.exposed(short, times: 2)
        let clippedInReference = reference.samples.samples.filter { $0 == 4095 }.count
        #expect(clippedInReference > 500, "the reference clips \(clippedInReference) samples")
        let frames = [reference, short, Self.exposed(short, times: 4), short]
        let burst = try Burst(frames)
        var o = Self.mergeOnly()
        o.merge = merge
        o.givenHomographies = Array(repeating: .identity, count: 4)
        let r = try BurstStacker.stack(contentsOf: burst.files, options: o)
        let m = try #require(r.raw).mosaic
        let off = zip(m.samples.samples, Self.scaled(short)).filter { $0 != $1 }.count
        #expect(off == 0, "\(off) photosites differ from the shortest frame's")
        #expect(abs(m.color.baselineExposure - (reference.color.baselineExposure + 1)) < 1e-6)
        #expect(r.notices.contains(.exposureScaled(source: burst.files[0], factor: 0.5)))
        #expect(r.notices.contains(.exposureScaled(source: burst.files[2], factor: 0.25)))
    }

    // Exposures as a file may give them (or a caller): NaN, infinite, 0, negative, denormal and
    // huge times and ISOs. A time that is not a positive number is "not given"; a product that
    // overflows or a ratio past 6 stops is refused by name; every gain returned is finite, in
    // [1/64, 1).
    @Test func exposureGainsStayFiniteOrRefuse() throws {
        func header(_ time: Float, _ iso: Float) -> RawFile {
            var m = Self.mosaic(width: 8, height: 8)
            m.capture.exposureTime = time
            m.capture.iso = iso
            return RawFile(raw: m, width: 8, height: 8, container: "DNG 1.4")
        }
        let files = ["a.dng", "b.dng"]
        for bad: Float in [.nan, -0.01, 0, -.infinity] {
            #expect(throws: StackError.self) {
                try RawBurstCheck.exposureGains(
                    [header(0.01, 100), header(0.02, 100), header(bad, 100)], files: files + ["c.dng"], reference: 0)
            }
            // Alone beside the reference it is not a bracket: nothing is scaled.
            #expect(
                try RawBurstCheck.exposureGains([header(0.01, 100), header(bad, 100)], files: files, reference: 0)
                    .isEmpty)
        }
        for (time, iso): (Float, Float) in [
            (.infinity, 100), (1e30, 1e10), (0.01, .infinity), (1e-40, 100), (.greatestFiniteMagnitude, 2)
        ] {
            #expect(throws: StackError.self) {
                try RawBurstCheck.exposureGains([header(0.01, 100), header(time, iso)], files: files, reference: 0)
            }
        }
        for iso: Float in [.nan, -5, 0] {
            // An ISO that is not a number above 1 counts as 1.
            let g = try RawBurstCheck.exposureGains([header(0.01, 1), header(0.04, iso)], files: files, reference: 0)
            #expect(g == ["b.dng": 0.25])
        }
        let g = try RawBurstCheck.exposureGains([header(0.08, 100), header(0.01, 100)], files: files, reference: 0)
        #expect(g == ["a.dng": 0.125])
    }

    @Test func exposureScalingMarksWhatCarriesNothing() {
        // A frame exposed twice as long: halved about its black; within 2 % of white it clipped.
        let half = RawPlanes.scaling(white: 4095, black: 256, gain: 0.5)
        let k = 65535.0 / 4095
        #expect(half[256] == UInt16((256 * k).rounded()))
        #expect(half[2256] == UInt16(((256 + 1000) * k).rounded()))
        #expect(half[4018] == UInt16(((256 + 0.5 * 3762) * k).rounded()))
        #expect(half[4019] == RawPlanes.missing && half[4095] == RawPlanes.missing)
        #expect(half[100] == UInt16(((256 - 78) * k).rounded()), "below black is scaled too, not cut")
        // Half as long: doubled; past full scale it carries nothing.
        let twice = RawPlanes.scaling(white: 4095, black: 256, gain: 2)
        #expect(twice[1256] == UInt16(((256 + 2000) * k).rounded()))
        #expect(twice[2175] == UInt16(((256 + 3838) * k).rounded()))
        #expect(twice[2176] == RawPlanes.missing)
        #expect(RawPlanes.scaling(white: 4095) == RawPlanes.scaling(white: 4095, black: 256, gain: 1))
    }

    @Test func eraseRefusesABracket() throws {
        let frames = [Self.mosaic(), Self.exposed(Self.mosaic(), times: 2), Self.mosaic()]
        let burst = try Burst(frames)
        var o = StackOptions()
        o.erase = EraseMask(width: 256, height: 192, masked: [Bool](repeating: false, count: 256 * 192))
        #expect {
            try BurstStacker.stack(contentsOf: burst.files, options: o)
        } throws: { e in
            guard case .rawFrameMismatch(let f, let what, _) = e as? StackError else { return false }
            return f.hasSuffix("f01.dng") && what.contains("--erase")
        }
    }
}
