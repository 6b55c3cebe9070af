import Foundation
import CKernels
import Testing
import EvanescoCore
@testable import EvanescoIO
@testable import EvanescoStack

/// ``RawSampling``: how a raw burst's frames are sampled at the reference's photosites.
@Suite struct RawSamplingTests {
    /// Frames that land between the reference's photosites: sampled by colour differences at full
    /// resolution, their mean is nearer the reference's scene than from each colour's own
    /// samples, on detail finer than a colour plane resolves.
    @Test func colourSamplingIsSharperBetweenSites() throws {
        let shifts: [(Float, Float)] = [(0, 0), (0.5, 0.3), (1.3, -0.6), (-0.7, 0.9), (0.4, -1.2), (-1.1, -0.5)]
        let frames = shifts.map { RawStackTests.mosaic(dx: $0.0, dy: $0.1, fine: 300) }
        let burst = try RawStackTests.Burst(frames)
        let want = RawStackTests.scaled(frames[0])
        var rms: [RawSampling: Double] = [:]
        for sampling in RawSampling.allCases {
            var o = StackOptions()
            o.merge = .mean
            o.rawSampling = sampling
            // The true registrations (frame -> reference photosites), so only the sampling differs.
            o.givenHomographies = shifts.map { Homography.translation(-Double($0.0), -Double($0.1)) }
            let m = try #require(try BurstStacker.stack(contentsOf: burst.files, options: o).raw).mosaic
            var sum = 0.0, n = 0
            for y in 16..<(m.height - 16) {
                for x in 16..<(m.width - 16) {
                    let d = Double(m.samples.samples[y * m.width + x]) - Double(want[y * m.width + x])
                    sum += d * d
                    n += 1
                }
            }
            rms[sampling] = (sum / Double(n)).squareRoot()
        }
        let sites = try #require(rms[.sites]), colour = try #require(rms[.colour])
        #expect(colour < 0.5 * sites, "RMS error (16-bit units): colour \(colour), sites \(sites)")
    }

    /// The colour gather takes eight cells at a time and loads their windows as runs of cells
    /// side by side where they are: a row gathered at once gives the same bits as cell by cell
    /// (a call of one cell loads its window cell by cell, clamped to the planes), for all four
    /// CFAs, on frames shifted, rotated and scaled past the planes' edges, with and without a
    /// local field.
    /// Each channel's photosite (2 row + column) and its offset from the cell centre for the four
    /// Bayer patterns, worked out by hand (channels: red, first green, blue, second green), and
    /// LinearRaw's three colours at the centre.
    @Test(
        arguments: [
            ([0, 1, 1, 2], [0, 1, 3, 2]), ([2, 1, 1, 0], [3, 1, 0, 2]), ([1, 0, 2, 1], [1, 0, 2, 3]),
            ([1, 2, 0, 1], [2, 0, 1, 3])
        ] as [([UInt8], [Int32])])
    func layoutSitesAndOffsets(colors: [UInt8], sites: [Int32]) throws {
        let layout = RawPlaneLayout(cfa: try #require(CFAPattern(colors: colors)))
        let s = layout.sites
        #expect([s.0, s.1, s.2, s.3] == sites)
        for ch in 0..<4 {
            let site = Int(sites[ch])
            #expect(layout.offsets[ch] == SIMD2(site % 2 == 0 ? -0.25 : 0.25, site / 2 == 0 ? -0.25 : 0.25))
            #expect(colors[site] == [0, 1, 2, 1][ch])
        }
        let linear = RawPlaneLayout(cfa: nil)
        #expect(linear.offsets == Array(repeating: .zero, count: 3) && linear.sites == (0, 0, 0, 0))
    }

    @Test(arguments: [[0, 1, 1, 2], [2, 1, 1, 0], [1, 0, 2, 1], [1, 2, 0, 1]] as [[UInt8]])
    func colourGatherInRunsIsCellByCell(colors: [UInt8]) throws {
        let w = 61, h = 29
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt16 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return UInt16(truncatingIfNeeded: state >> 40) % 60000
        }
        let planes = (0..<(w * h * 4)).map { _ in next() }, green = (0..<(w * h * 2)).map { _ in next() }
        let layout = RawPlaneLayout(cfa: try #require(CFAPattern(colors: colors)))
        var params = RawMerge.parameters(
            frames: 1, channels: 4, layout: layout, noise: Array(repeating: (slope: 0.8, intercept: 30), count: 4),
            options: StackOptions())
        params.colour_pull = RawPlaneLayout.colourPull
        let a = 2.5 * Double.pi / 180
        let maps: [[Double]] = [
            [1, 0, 0.37, 0, 1, -0.21, 0, 0, 1],  // a fraction of a cell: every chunk one run
            [cos(a), -sin(a), 1.3, sin(a), cos(a), -0.8, 0, 0, 1],  // rows change within chunks
            [1.04, 0.01, -2.6, -0.02, 0.97, 1.9, 0.0004, 0, 1]  // cells skipped, the edges passed
        ]
        let columns = 9, rows = 5
        let dx = (0..<(columns * rows)).map { Float($0 % 7) * 0.23 - 0.7 }
        let dy = (0..<(columns * rows)).map { Float($0 % 5) * 0.31 - 0.6 }
        var differing = 0
        for m in maps {
            for withField in [false, true] {
                planes.withUnsafeBufferPointer { pp in
                    green.withUnsafeBufferPointer { gp in
                        dx.withUnsafeBufferPointer { dxp in
                            dy.withUnsafeBufferPointer { dyp in
                                var f = evn_raw_frame()
                                f.planes = pp.baseAddress
                                f.green = gp.baseAddress
                                f.width = Int32(w)
                                f.height = Int32(h)
                                f.weight_scale = 1
                                withUnsafeMutableBytes(of: &f.m) { b in
                                    for j in 0..<9 {
                                        b.storeBytes(of: Float(m[j]), toByteOffset: 4 * j, as: Float.self)
                                    }
                                }
                                Self.place(&f, layout)
                                if withField {
                                    f.field_dx = dxp.baseAddress
                                    f.field_dy = dyp.baseAddress
                                    f.field_cell = 8
                                    f.field_columns = Int32(columns)
                                    f.field_rows = Int32(rows)
                                }
                                // Down the rows together (a band's rows, clamped at the edges,
                                // and rows that jump back), as the Wiener pass gathers them.
                                let ys = [0, 0] + Array(0..<h) + [h - 1, h - 1, 3, 17, 16]
                                let swept = Self.gatherRows(&f, &params, ys: ys, width: w)
                                for y in 0..<h {
                                    var row = [Float](repeating: -1, count: 8 * w), cell = row
                                    row.withUnsafeMutableBufferPointer { r in
                                        evn_raw_gather_row(
                                            &f, &params, Int32(y), 0, Int32(w), r.baseAddress, r.baseAddress! + 4 * w)
                                    }
                                    cell.withUnsafeMutableBufferPointer { c in
                                        for x in 0..<w {
                                            evn_raw_gather_row(
                                                &f, &params, Int32(y), Int32(x), 1, c.baseAddress! + 4 * x,
                                                c.baseAddress! + 4 * w + 4 * x)
                                        }
                                    }
                                    differing += zip(row, cell).filter { $0.bitPattern != $1.bitPattern }.count
                                    for (i, yi) in ys.enumerated() where yi == y {
                                        let band = swept[(8 * w * i)..<(8 * w * (i + 1))]
                                        differing += zip(band, cell).filter { $0.bitPattern != $1.bitPattern }.count
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        #expect(differing == 0)
    }

    /// `evn_raw_gather_rows` of `f` at rows `ys`, width `w`: row i's values then its weights, 8 w
    /// floats a row.
    static func gatherRows(
        _ f: inout evn_raw_frame, _ params: inout evn_raw_merge_params, ys: [Int], width w: Int
    ) -> [Float] {
        var out = [Float](repeating: -1, count: 8 * w * ys.count)
        out.withUnsafeMutableBufferPointer { s in
            let v = ys.indices.map { Optional(s.baseAddress! + 8 * w * $0) }
            let wt = ys.indices.map { Optional(s.baseAddress! + 8 * w * $0 + 4 * w) }
            evn_raw_gather_rows(&f, &params, ys.map(Int32.init), Int32(ys.count), 0, Int32(w), v, wt)
        }
        return out
    }

    /// `f`'s sites and offsets: `layout`'s, each channel where it lies in the cell.
    static func place(_ f: inout evn_raw_frame, _ layout: RawPlaneLayout) {
        withUnsafeMutableBytes(of: &f.site) { b in
            for (ch, o) in layout.offsets.enumerated() {
                b.storeBytes(of: o.x, toByteOffset: 8 * ch, as: Float.self)
                b.storeBytes(of: o.y, toByteOffset: 8 * ch + 4, as: Float.self)
            }
        }
        f.offset = f.site
    }

    /// The reference (a frame that does not move) is gathered by copying its samples, weight 1:
    /// the same bits as the colour gather interpolating them (forced here by a field of zeros),
    /// for all four CFAs with the merge's own kernels; a frame moved by a fraction of a cell is
    /// interpolated.
    @Test(arguments: [[0, 1, 1, 2], [2, 1, 1, 0], [1, 0, 2, 1], [1, 2, 0, 1]] as [[UInt8]])
    func theReferenceGathersItsOwnSamples(colors: [UInt8]) throws {
        let w = 45, h = 21
        var g = SplitMix(seed: UInt64(colors.reduce(0) { $0 * 3 + Int($1) }))
        let planes = (0..<(w * h * 4)).map { _ in UInt16(truncatingIfNeeded: g.next() >> 48) }
        let green = (0..<(w * h * 2)).map { _ in UInt16(truncatingIfNeeded: g.next() >> 48) }
        let layout = RawPlaneLayout(cfa: try #require(CFAPattern(colors: colors)))
        var params = RawMerge.parameters(
            frames: 1, channels: 4, layout: layout, noise: Array(repeating: (slope: 0.8, intercept: 30), count: 4),
            options: StackOptions())
        params.colour_pull = RawPlaneLayout.colourPull
        let zeros = [Float](repeating: 0, count: 4 * 3)
        func gathered(shift: Float, field: Bool) -> (values: [Float], weights: [Float], own: Bool) {
            planes.withUnsafeBufferPointer { pp in
                green.withUnsafeBufferPointer { gp in
                    zeros.withUnsafeBufferPointer { z in
                        var f = evn_raw_frame()
                        (f.planes, f.green, f.width, f.height, f.weight_scale) = (
                            pp.baseAddress, gp.baseAddress, Int32(w), Int32(h), 1
                        )
                        f.m = (1, 0, shift, 0, 1, 0, 0, 0, 1)
                        Self.place(&f, layout)
                        if field {
                            (f.field_dx, f.field_dy, f.field_cell, f.field_columns, f.field_rows) = (
                                z.baseAddress, z.baseAddress, 16, 4, 3
                            )
                        }
                        var out = [Float](repeating: -1, count: 8 * w * h)
                        out.withUnsafeMutableBufferPointer { o in
                            for y in 0..<h {
                                let v = o.baseAddress! + 8 * w * y
                                evn_raw_gather_row(&f, &params, Int32(y), 0, Int32(w), v, v + 4 * w)
                            }
                        }
                        let rows = (0..<h).map { out[(8 * w * $0)..<(8 * w * $0 + 8 * w)] }
                        return (
                            rows.flatMap { $0.prefix(4 * w) }, rows.flatMap { $0.suffix(4 * w) },
                            evn_raw_gather_is_own_samples(&f, &params) != 0
                        )
                    }
                }
            }
        }
        let copied = gathered(shift: 0, field: false), interpolated = gathered(shift: 0, field: true)
        #expect(copied.own && !interpolated.own)
        #expect(copied.values == planes.map(Float.init) && copied.weights.allSatisfy { $0 == 1 })
        #expect(zip(copied.values, interpolated.values).allSatisfy { $0.bitPattern == $1.bitPattern })
        #expect(zip(copied.weights, interpolated.weights).allSatisfy { $0.bitPattern == $1.bitPattern })
        let moved = gathered(shift: 0.3, field: false)
        #expect(!moved.own && moved.values != copied.values)
    }

    /// The colour sampling's estimates (half the planes' bytes again) count in the memory limit:
    /// a burst whose planes fit in it but whose planes and estimates do not is spilled.
    @Test func colourEstimatesCountInTheMemoryLimit() throws {
        let frames = (0..<6).map { k in RawStackTests.mosaic(dx: Float(k) * 0.4, dy: Float(k % 2) * 0.3) }
        let burst = try RawStackTests.Burst(frames)
        let planes = 6 * 256 * 192 * 2
        #expect(BurstInput.estimatedDecodedBytes(burst.files, decoder: .rawPlanes, sampling: .sites) == planes)
        #expect(BurstInput.estimatedDecodedBytes(burst.files, decoder: .rawPlanes, sampling: .colour) == planes * 3 / 2)
        var o = StackOptions()
        o.memoryLimit = planes * 5 / 4
        o.spillDirectory = burst.path
        for sampling in RawSampling.allCases {
            o.rawSampling = sampling
            let r = try BurstStacker.stack(contentsOf: burst.files, options: o)
            #expect(
                (r.spilledBytes != nil) == (sampling == .colour), "\(sampling): spilled \(r.spilledBytes ?? 0) bytes")
        }
    }

    /// A spilled Bayer burst's merge bands leave room for the colour sampling's estimates: 100
    /// frames of 3000 x 2000 cells, 8 bytes a cell (12 with the estimates), within half of 1 GiB.
    @Test func colourEstimatesCountInTheMergeBands() throws {
        let spill = try FrameSpill(directory: NSTemporaryDirectory(), frameBytes: 3000 * 2000 * 8, slots: 1)
        let source = BurstFrameSource(
            names: ["a"], width: 3000, height: 2000, channels: 4, eightBit: false, referenceMetadata: ImageMetadata(),
            memory: nil, spill: spill, slots: [0])
        var o = StackOptions()
        o.memoryLimit = 1 << 30
        o.rawLayout = RawPlaneLayout(cfa: .rggb)
        o.rawSampling = .sites
        #expect(source.bandRows(frames: 100, options: o) == 144)
        o.rawSampling = .colour
        let rows = try #require(source.bandRows(frames: 100, options: o))
        #expect(rows == 80 && (rows + 64) * 100 * 3000 * 12 <= 1 << 29)
    }
}
