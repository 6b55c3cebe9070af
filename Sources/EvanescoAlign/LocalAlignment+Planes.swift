import CKernels
import EvanescoCore
import Foundation

/// One level of the reference prepared for the cell searches: its pixels and central-difference
/// gradients (0 on the one-pixel border), computed once for every frame matched against it.
final class ReferencePlane: @unchecked Sendable {
    let width: Int, height: Int
    let ref: UnsafeMutablePointer<Float>, gx: UnsafeMutablePointer<Float>, gy: UnsafeMutablePointer<Float>

    init(_ image: Image<Float>) {
        precondition(image.channels == 1)
        let w = image.width, h = image.height, n = w * h
        width = w
        height = h
        ref = .allocate(capacity: max(1, n))
        gx = .allocate(capacity: max(1, n))
        gy = .allocate(capacity: max(1, n))
        ref.initialize(repeating: 0, count: max(1, n))
        image.samples.withUnsafeBufferPointer { if n > 0 { ref.update(from: $0.baseAddress!, count: n) } }
        gx.initialize(repeating: 0, count: max(1, n))
        gy.initialize(repeating: 0, count: max(1, n))
        if w >= 3 && h >= 3 {
            for y in 1..<(h - 1) {
                for x in 1..<(w - 1) {
                    let i = y &* w &+ x
                    gx[i] = 0.5 * (ref[i &+ 1] - ref[i &- 1])
                    gy[i] = 0.5 * (ref[i &+ w] - ref[i &- w])
                }
            }
        }
    }
    deinit {
        ref.deallocate()
        gx.deallocate()
        gy.deallocate()
    }

    private let lock = NSLock()
    private var structures: [SIMD2<Int>: [SIMD3<Float>]] = [:]

    /// The gradient structure tensor (``Window/structure(_:x0:y0:x1:y1:)``) of every cell's
    /// window of a grid of `cell` full-resolution pixels (`columns` x `rows` cells) at this level
    /// (scale `s`) with `radius`: it depends on the reference alone, so the first frame matched
    /// computes it and the burst's others reuse it.
    func structures(cell: Int, scale s: Float, radius: Int, columns: Int, rows: Int) -> [SIMD3<Float>] {
        lock.lock()
        defer { lock.unlock() }
        let key = SIMD2(cell, radius)
        if let t = structures[key], t.count == columns * rows { return t }
        var t = [SIMD3<Float>](repeating: .zero, count: columns * rows)
        for j in 0..<rows {
            for i in 0..<columns {
                let (cx, cy) = Window.centre(i, j, cell: cell, scale: s)
                let (x0, y0, x1, y1) = Window.bounds(width: width, height: height, cx: cx, cy: cy, radius: radius)
                t[j * columns + i] = Window.structure(self, x0: x0, y0: y0, x1: x1, y1: y1)
            }
        }
        structures[key] = t
        return t
    }
}

/// One pyramid level prepared for the cell searches: the reference, its central-difference
/// gradients (computed once, not once per window and iteration), the frame warped into it, and a
/// summed table of the warped frame's invalid pixels, so a window can tell at once that every tap
/// it reads is valid and take the vectorised path.
final class LevelPlanes: @unchecked Sendable {
    let width: Int, height: Int
    /// The reference level and its gradients (shared by every frame's planes at this level).
    let reference: ReferencePlane
    /// Reference, its x and y gradients (0 on the border), and the warped frame: width x height.
    let ref: UnsafeMutablePointer<Float>, gx: UnsafeMutablePointer<Float>, gy: UnsafeMutablePointer<Float>
    let frame: UnsafeMutablePointer<Float>
    /// The warped frame's validity (non-zero: valid).
    let valid: UnsafeMutablePointer<UInt8>
    /// invalid[(y * (width + 1)) + x]: invalid pixels in rows < y, columns < x.
    let invalid: UnsafeMutablePointer<Int32>

    /// `image` (a level of a frame's pyramid) warped by `homography` (that level's) onto the
    /// reference level, and its validity, written straight into the planes.
    init(reference: ReferencePlane, frame image: Image<Float>, homography: Homography) {
        precondition(image.channels == 1)
        let w = reference.width, h = reference.height, n = w * h
        width = w
        height = h
        self.reference = reference
        ref = reference.ref
        gx = reference.gx
        gy = reference.gy
        frame = .allocate(capacity: n)
        valid = .allocate(capacity: n)
        invalid = .allocate(capacity: (w + 1) * (h + 1))
        let sampler = RowSampler(frame: image, homography: homography, interpolation: .bilinear)
        let shared = UncheckedSendable((frame, valid))
        StripExecutor.forEachStrip(rows: h, minimumRows: 16) { rows in
            let (frame, valid) = shared.value
            for y in rows { sampler.sampleRow(y: y, x0: 0, x1: w, into: frame + y * w, valid: valid + y * w) }
        }
        let W = w + 1
        invalid.initialize(repeating: 0, count: W * (h + 1))
        for y in 0..<h {
            var row: Int32 = 0
            for x in 0..<w {
                row &+= valid[y &* w &+ x] == 0 ? 1 : 0
                invalid[(y &+ 1) &* W &+ x &+ 1] = invalid[y &* W &+ x &+ 1] &+ row
            }
        }
    }

    /// Summed tables of the warped frame and its square ((width + 1) x (height + 1), Double), for
    /// the block search's window sums; made by ``prepareBoxSums()`` on the level that searches.
    private(set) var frameSums: UnsafeMutablePointer<Double>? = nil, squareSums: UnsafeMutablePointer<Double>? = nil

    deinit {
        frame.deallocate()
        valid.deallocate()
        invalid.deallocate()
        frameSums?.deallocate()
        squareSums?.deallocate()
    }

    /// Makes ``frameSums`` and ``squareSums`` (call before sharing the planes between threads).
    func prepareBoxSums() {
        guard frameSums == nil else { return }
        let W = width + 1, n = W * (height + 1)
        let s1 = UnsafeMutablePointer<Double>.allocate(capacity: n),
            s2 = UnsafeMutablePointer<Double>.allocate(capacity: n)
        s1.initialize(repeating: 0, count: n)
        s2.initialize(repeating: 0, count: n)
        for y in 0..<height {
            var r1 = 0.0, r2 = 0.0
            for x in 0..<width {
                let v = Double(frame[y * width + x])
                r1 += v
                r2 += v * v
                s1[(y + 1) * W + x + 1] = s1[y * W + x + 1] + r1
                s2[(y + 1) * W + x + 1] = s2[y * W + x + 1] + r2
            }
        }
        frameSums = s1
        squareSums = s2
    }

    /// The warped frame's sum and sum of squares over columns x0..<x1, rows y0..<y1 (inside);
    /// ``prepareBoxSums()`` must have run.
    @inline(__always) func boxSums(x0: Int, y0: Int, x1: Int, y1: Int) -> (Float, Float) {
        guard let s1 = frameSums, let s2 = squareSums else {
            preconditionFailure("LevelPlanes.boxSums before prepareBoxSums()")
        }
        let W = width + 1
        let a = y0 * W + x0, b = y0 * W + x1, c = y1 * W + x0, d = y1 * W + x1
        return (Float(s1[d] - s1[b] - s1[c] + s1[a]), Float(s2[d] - s2[b] - s2[c] + s2[a]))
    }

    /// Whether every warped-frame pixel in columns x0..<x1, rows y0..<y1 is inside and valid.
    func allValid(x0: Int, y0: Int, x1: Int, y1: Int) -> Bool {
        guard x0 >= 0, y0 >= 0, x1 <= width, y1 <= height, x0 < x1, y0 < y1 else { return false }
        let W = width + 1
        return invalid[y1 * W + x1] - invalid[y0 * W + x1] - invalid[y1 * W + x0] + invalid[y0 * W + x0] == 0
    }
}

@inline(__always) func load4(_ p: UnsafePointer<Float>) -> SIMD4<Float> {
    UnsafeRawPointer(p).loadUnaligned(as: SIMD4<Float>.self)
}
@inline(__always) func load4(_ p: UnsafeMutablePointer<Float>) -> SIMD4<Float> {
    UnsafeRawPointer(p).loadUnaligned(as: SIMD4<Float>.self)
}
@inline(__always) func store4(_ v: SIMD4<Float>, _ p: UnsafeMutablePointer<Float>) {
    UnsafeMutableRawPointer(p).storeBytes(of: v, as: SIMD4<Float>.self)
}
// The standard library's pointwiseMin/Max are generic calls here, not one instruction each.
@inline(__always) func vmin(_ a: SIMD4<Float>, _ b: SIMD4<Float>) -> SIMD4<Float> {
    a.replacing(with: b, where: b .< a)
}
@inline(__always) func vmax(_ a: SIMD4<Float>, _ b: SIMD4<Float>) -> SIMD4<Float> {
    a.replacing(with: b, where: b .> a)
}

/// One cell's window: reference pixels, their gradients, and the warped frame to match.
struct Window {
    let L: LevelPlanes
    let x0: Int, y0: Int, x1: Int, y1: Int
    var count: Int { (x1 - x0) * (y1 - y0) }

    /// The pixels within `radius` of the (possibly half-integer) centre, symmetric about it, so
    /// that a shift varying across the window is measured at the cell's centre. The one-pixel
    /// border, where the gradients are not defined, is left out.
    init(_ L: LevelPlanes, cx: Float, cy: Float, radius: Int) {
        self.L = L
        (x0, y0, x1, y1) = Window.bounds(width: L.width, height: L.height, cx: cx, cy: cy, radius: radius)
    }

    /// The window's columns x0..<x1 and rows y0..<y1 in a `width` x `height` level.
    static func bounds(width: Int, height: Int, cx: Float, cy: Float, radius: Int) -> (Int, Int, Int, Int) {
        let r = Float(radius)
        let x0 = max(1, Int((cx - r).rounded(.up))), y0 = max(1, Int((cy - r).rounded(.up)))
        return (
            x0, y0, max(x0, min(width - 1, Int((cx + r).rounded(.down)) + 1)),
            max(y0, min(height - 1, Int((cy + r).rounded(.down)) + 1))
        )
    }

    /// The centre of cell (`i`, `j`) of a grid of `cell` full-resolution pixels, in the pixels
    /// of a level at scale `s`.
    @inline(__always) static func centre(_ i: Int, _ j: Int, cell: Int, scale s: Float) -> (Float, Float) {
        ((Float(i) + 0.5) * Float(cell) * s - 0.5, (Float(j) + 0.5) * Float(cell) * s - 0.5)
    }

    /// The reference's gradient structure tensor over the window's rows the sums visit, per
    /// pixel: the means of gx^2, gx gy and gy^2 (0 for an empty window).
    static func structure(_ ref: ReferencePlane, x0: Int, y0: Int, x1: Int, y1: Int) -> SIMD3<Float> {
        guard x1 > x0, y1 > y0 else { return .zero }
        let w = ref.width
        var xx4 = SIMD4<Float>(), xy4 = SIMD4<Float>(), yy4 = SIMD4<Float>()
        var sxx: Float = 0, sxy: Float = 0, syy: Float = 0
        for y in stride(from: y0, to: y1, by: Window.rowStep) {
            let gxr = ref.gx + y * w, gyr = ref.gy + y * w
            var x = x0
            while x + 4 <= x1 {
                let gx = load4(gxr + x), gy = load4(gyr + x)
                xx4 += gx * gx
                xy4 += gx * gy
                yy4 += gy * gy
                x += 4
            }
            while x < x1 {
                let gx = gxr[x], gy = gyr[x]
                sxx += gx * gx
                sxy += gx * gy
                syy += gy * gy
                x += 1
            }
        }
        sxx += xx4.sum()
        sxy += xy4.sum()
        syy += yy4.sum()
        let n = Float((x1 - x0) * Window.rows(y0, y1))
        return SIMD3(sxx, sxy, syy) / n
    }

    /// The smaller eigenvalue of a structure tensor (``structure(_:x0:y0:x1:y1:)``): the window's
    /// texture.
    static func texture(_ s: SIMD3<Float>) -> Float {
        let tr = s.x + s.z, det = s.x * s.z - s.y * s.y
        return tr / 2 - max(0, tr * tr / 4 - det).squareRoot()
    }

    /// The integer shift within `radius` of `d` (rounded) that best matches, zero-mean SSD
    /// (the level's ``LevelPlanes/prepareBoxSums()`` must have run).
    func blockSearch(around d: SIMD2<Float>, radius: Int) -> SIMD2<Float> {
        let w = L.width, r = L.ref, p = L.frame, v = L.valid
        let bx = Int(d.x.rounded()), by = Int(d.y.rounded())
        var best = Float.infinity, bestShift = d
        let n = Float(count)
        var refMean: Float = 0
        for y in y0..<y1 { for x in x0..<x1 { refMean += r[y * w + x] } }
        refMean /= n
        let mean4 = SIMD4<Float>(repeating: refMean)
        for sy in (by - radius)...(by + radius) {
            for sx in (bx - radius)...(bx + radius) {
                // Every index below stays inside the window's rows and columns of both images.
                guard y0 + sy >= 0, y1 - 1 + sy < L.height, x0 + sx >= 0, x1 - 1 + sx < w else { continue }
                var sum: Float = 0, sum2: Float = 0, cross: Float = 0, valid = 0
                if L.allValid(x0: x0 + sx, y0: y0 + sy, x1: x1 + sx, y1: y1 + sy) {
                    // Every pixel valid: the frame's sums come from the level's summed tables,
                    // and only the cross term is summed here.
                    var c4 = SIMD4<Float>()
                    (sum, sum2) = L.boxSums(x0: x0 + sx, y0: y0 + sy, x1: x1 + sx, y1: y1 + sy)
                    for y in y0..<y1 {
                        let ro = r + y * w, fo = p + (y + sy) * w + sx
                        var x = x0
                        while x + 4 <= x1 {
                            c4 += load4(fo + x) * (load4(ro + x) - mean4)
                            x += 4
                        }
                        while x < x1 {
                            cross += fo[x] * (ro[x] - refMean)
                            x += 1
                        }
                    }
                    cross += c4.sum()
                    valid = count
                } else {
                    for y in y0..<y1 {
                        let ro = y * w, fo = (y + sy) * w + sx
                        for x in x0..<x1 where v[fo + x] != 0 {
                            let f = p[fo + x], g = r[ro + x] - refMean
                            sum += f
                            sum2 += f * f
                            cross += f * g
                            valid += 1
                        }
                    }
                }
                guard Float(valid) > 0.6 * n else { continue }
                // Zero-mean SSD up to terms that do not depend on the shift, per valid pixel.
                let fm = sum / Float(valid)
                let cost =
                    (sum2 - fm * sum - 2 * cross) / Float(valid) + 0.5
                    * Float((sx - bx) * (sx - bx) + (sy - by) * (sy - by))
                if cost < best {
                    best = cost
                    bestShift = SIMD2(Float(sx), Float(sy))
                }
            }
        }
        return bestShift
    }

    /// Gauss-Newton on shift + brightness offset with Huber then Tukey weights, reference
    /// gradients (the inverse-compositional approximation), held near `start` by a prior.
    /// Returns whether the window had texture and coverage, the match's residual (RMS grey
    /// levels) and the texture `minEig` it was given (the
    /// window's ``texture(_:x0:y0:x1:y1:)``, the same for every frame: the reference's).
    func lucasKanade(
        from start: SIMD2<Float>, iterations: Int, texture minEig: Float, prior priorWeight: Float = 0.05
    ) -> (SIMD2<Float>, Bool, Float, Float) {
        guard count > 0 else { return (start, false, .infinity, 0) }
        let n = Float((x1 - x0) * Window.rows(y0, y1))
        guard minEig > 0.05 else { return (start, false, .infinity, 0) }
        // A prior toward the start (the coarser level's answer): a window with little texture in
        // one direction moves little in it, instead of wandering.
        let prior: Float = priorWeight * n
        var d = start, bias: Float = 0
        // The residual of the last iteration's accumulation (at the shift it started from: the
        // steps have converged to a small fraction of a pixel by then).
        var lastResidual: Float = .infinity
        for it in 0..<iterations {
            // Huber weights first, then Tukey's: once the window is nearly aligned, pixels of
            // something that moved carry no weight at all.
            var a = accumulate(d, bias, tukey: it >= 1, residual: true)
            guard Float(a.used) > 0.6 * n else { return (start, false, .infinity, 0) }
            lastResidual = (a.squared_residual / Float(a.used)).squareRoot()
            // The prior adds prior * |d + step - start|^2.
            a.a00 += prior
            a.a11 += prior
            a.b0 += prior * (d.x - start.x)
            a.b1 += prior * (d.y - start.y)
            // Solve the 3x3 system (symmetric) by Cramer's rule; the step is minus the solution.
            let c00 = a.a11 * a.a22 - a.a12 * a.a12, c01 = a.a02 * a.a12 - a.a01 * a.a22,
                c02 = a.a01 * a.a12 - a.a02 * a.a11
            let det3 = a.a00 * c00 + a.a01 * c01 + a.a02 * c02
            guard abs(det3) > 1e-9 else { return (start, false, .infinity, 0) }
            let c11 = a.a00 * a.a22 - a.a02 * a.a02, c12 = a.a01 * a.a02 - a.a00 * a.a12,
                c22 = a.a00 * a.a11 - a.a01 * a.a01
            let sx = (c00 * a.b0 + c01 * a.b1 + c02 * a.b2) / det3
            let sy = (c01 * a.b0 + c11 * a.b1 + c12 * a.b2) / det3
            let sb = (c02 * a.b0 + c12 * a.b1 + c22 * a.b2) / det3
            d -= SIMD2(sx, sy)
            bias += sb
            // One level refines by little: the coarser level had it within a pixel or so.
            let moved = d - start
            if (moved * moved).sum() > 4 { d = start + moved / (moved * moved).sum().squareRoot() * 2 }
            if sx * sx + sy * sy < 1e-4 { break }
        }
        guard d.x.isFinite, d.y.isFinite else { return (start, false, .infinity, 0) }
        return (d, true, lastResidual, minEig)
    }

    static let huber: Float = 8, tukeyC: Float = 12

    /// Lucas-Kanade sums every other row of a window: a 33 x 33 window still has 561 pixels,
    /// plenty for a shift and an offset, at half the cost per iteration (measured on
    /// motorcycle-parallax with the detail pass's 5 iterations: the same PSNR to 0.02 dB).
    static let rowStep = 2

    /// The rows of `y0..<y1` the sums visit.
    @inline(__always) static func rows(_ y0: Int, _ y1: Int) -> Int { y1 > y0 ? (y1 - y0 + rowStep - 1) / rowStep : 0 }

    /// The weighted normal equations of shift + offset at shift `d` over the window's pixels
    /// whose four bilinear taps are valid, and the sum of squared (capped) residuals (zero unless
    /// `residual`). The shift is the same for the whole window: one set of bilinear weights, one
    /// offset.
    func accumulate(_ d: SIMD2<Float>, _ bias: Float, tukey: Bool, residual: Bool = true) -> evn_lk_sums {
        let w = L.width, h = L.height
        let fx = d.x.rounded(.down), fy = d.y.rounded(.down)
        guard fx.magnitude < 1e6, fy.magnitude < 1e6 else { return evn_lk_sums() }
        let ox = Int(fx), oy = Int(fy), tx = d.x - fx, ty = d.y - fy
        // The window's rows and columns whose four taps are inside the level.
        let ya = max(y0, -oy), yb = min(y1, h - 1 - oy), xa = max(x0, -ox), xb = min(x1, w - 1 - ox)
        guard ya < yb, xa < xb else { return evn_lk_sums() }
        // Eight pixels at a time (CKernels, with AVX2 where the CPU has it); the validity test
        // only where some tap is invalid.
        let allValid = L.allValid(x0: xa + ox, y0: ya + oy, x1: xb + ox + 1, y1: yb + oy + 1)
        var window = evn_lk_window(
            ref: L.ref, gx: L.gx, gy: L.gy, frame: L.frame, stride: w, frame_offset: oy * w + ox,
            valid: allValid ? nil : UnsafePointer(L.valid),
            x0: xa, x1: xb, y0: ya, y1: yb, row_step: Window.rowStep,
            w00: (1 - tx) * (1 - ty), w01: tx * (1 - ty), w10: (1 - tx) * ty, w11: tx * ty,
            bias: bias, tukey: tukey ? 1 : 0, huber: Window.huber, inverse_tukey_c: 1 / Window.tukeyC,
            residual: residual ? 1 : 0)
        var s = evn_lk_sums()
        evn_lk_sums_window(&window, &s)
        return s
    }
}
