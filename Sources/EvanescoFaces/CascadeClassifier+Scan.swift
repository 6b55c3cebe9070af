import EvanescoCore
import Foundation

extension CascadeClassifier {
    /// The tables one scan reads, as buffers: the integral images (sum, and squared sum for HAAR),
    /// the feature rectangles as integral-image offsets, and the cascade's trees.
    struct ScanTables {
        let sum: UnsafeBufferPointer<Int32>, squares: UnsafeBufferPointer<Double>
        /// HAAR: four corner offsets per rectangle; LBP: the 4x4 block corners per feature.
        let offsets: UnsafeBufferPointer<Int32>, lbpOffsets: UnsafeBufferPointer<Int32>
        let rects: UnsafeBufferPointer<HaarRect>, nodes: UnsafeBufferPointer<Node>
        let weaks: UnsafeBufferPointer<Weak>, leaves: UnsafeBufferPointer<Float>
        let subsets: UnsafeBufferPointer<Int32>, stages: UnsafeBufferPointer<Stage>
    }

    /// Window positions (top-left, in `img`'s pixels) that pass every stage.
    func scan(_ img: Image<UInt8>, step: Int) -> [(Int, Int)] {
        let w = img.width, h = img.height, stride = w + 1
        let (sum, sq) = integrals(img)
        let maxX = w - windowWidth, maxY = h - windowHeight
        let (offs, lbpOffs) = featureOffsets(stride: stride)
        let rows = maxY / step + 1
        let out = LockedBox([(Int, Int)]())
        withTables(sum: sum, squares: sq, offsets: offs, lbpOffsets: lbpOffs) { tables in
            StripExecutor.forEachStrip(rows: rows, minimumRows: 4) { band in
                var local: [(Int, Int)] = []
                for ry in band {
                    let y = ry * step
                    var x = 0
                    while x <= maxX {
                        let passed = stagesPassed(tables, base: y * stride + x, stride: stride)
                        if passed == tables.stages.count { local.append((x, y)) }
                        x += passed == 0 ? 2 * step : step
                    }
                }
                out.update { $0 += local }
            }
        }
        return out.value
    }

    /// The integral image of `img` ((w + 1) x (h + 1), a zero first row and column) and, for HAAR,
    /// of its squares.
    func integrals(_ img: Image<UInt8>) -> ([Int32], [Double]) {
        let w = img.width, h = img.height, stride = w + 1
        var sum = [Int32](repeating: 0, count: (w + 1) * (h + 1))
        var sq = [Double](repeating: 0, count: feature == .haar ? (w + 1) * (h + 1) : 0)
        img.samples.withUnsafeBufferPointer { s in
            for y in 0..<h {
                var rs: Int32 = 0, rq: Double = 0
                for x in 0..<w {
                    let v = Int32(s[y * w + x])
                    rs += v
                    sum[(y + 1) * stride + x + 1] = sum[y * stride + x + 1] + rs
                    if feature == .haar {
                        rq += Double(v * v)
                        sq[(y + 1) * stride + x + 1] = sq[y * stride + x + 1] + rq
                    }
                }
            }
        }
        return (sum, sq)
    }

    /// Feature rectangles as integral-image offsets for this stride: four corners per rectangle,
    /// and for LBP the 4x4 grid of corners of each feature's 3x3 blocks.
    func featureOffsets(stride: Int) -> ([Int32], [Int32]) {
        let offs: [Int32] = rects.flatMap { r -> [Int32] in
            let x = Int(r.x), y = Int(r.y), rw = Int(r.w), rh = Int(r.h)
            return [
                Int32(y * stride + x), Int32(y * stride + x + rw), Int32((y + rh) * stride + x),
                Int32((y + rh) * stride + x + rw)
            ]
        }
        guard feature == .lbp else { return (offs, []) }
        let lbp = rects.flatMap { r -> [Int32] in
            var o: [Int32] = []
            for j in 0..<4 {
                for i in 0..<4 { o.append(Int32((Int(r.y) + j * Int(r.h)) * stride + Int(r.x) + i * Int(r.w))) }
            }
            return o
        }
        return (offs, lbp)
    }

    /// Calls `body` with the scan's buffers.
    func withTables(
        sum: [Int32], squares: [Double], offsets: [Int32], lbpOffsets: [Int32], _ body: (ScanTables) -> Void
    ) {
        sum.withUnsafeBufferPointer { S in
            squares.withUnsafeBufferPointer { Q in
                offsets.withUnsafeBufferPointer { O in
                    lbpOffsets.withUnsafeBufferPointer { L in
                        rects.withUnsafeBufferPointer { R in
                            nodes.withUnsafeBufferPointer { N in
                                weaks.withUnsafeBufferPointer { Wk in
                                    leaves.withUnsafeBufferPointer { Lv in
                                        subsets.withUnsafeBufferPointer { Sub in
                                            stages.withUnsafeBufferPointer { St in
                                                body(
                                                    ScanTables(
                                                        sum: S, squares: Q, offsets: O, lbpOffsets: L, rects: R,
                                                        nodes: N, weaks: Wk, leaves: Lv, subsets: Sub, stages: St))
                                            }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }

    /// The stages the window at integral offset `base` passes, stopping at the first it fails.
    @inline(__always)
    func stagesPassed(_ t: ScanTables, base: Int, stride: Int) -> Int {
        let ww = windowWidth, wh = windowHeight, S = t.sum
        var inv: Float = 1
        if feature == .haar {
            // The window's contrast (its standard deviation, inside a one-pixel border) normalises the features.
            let n0 = stride + 1, n1 = stride + ww - 1, n2 = (wh - 1) * stride + 1, n3 = (wh - 1) * stride + ww - 1
            let s = Double(S[base + n3] - S[base + n1] - S[base + n2] + S[base + n0])
            let Q = t.squares
            let q = Q[base + n3] - Q[base + n1] - Q[base + n2] + Q[base + n0]
            var nf = Double((ww - 2) * (wh - 2)) * q - s * s
            nf = nf > 0 ? nf.squareRoot() : 1
            inv = Float(1 / nf)
        }
        var passed = 0
        for st in t.stages {
            var acc: Float = 0
            for wi in Int(st.weakStart)..<Int(st.weakStart + st.weakCount) {
                let wk = t.weaks[wi]
                var idx: Int32 = 0
                repeat {
                    let node = t.nodes[Int(wk.node) + Int(idx)]
                    let f = Int(node.feature)
                    let left =
                        feature == .haar
                        ? haarValue(t, feature: f, base: base) * inv < node.threshold
                        : lbpPasses(t, feature: f, base: base, subset: Int(node.subset))
                    idx = left ? node.left : node.right
                } while idx > 0
                acc += t.leaves[Int(wk.leaf) + Int(-idx)]
            }
            if acc < st.threshold { break }
            passed += 1
        }
        return passed
    }

    /// A HAAR feature's weighted rectangle sums at the window at `base`.
    @inline(__always)
    func haarValue(_ t: ScanTables, feature f: Int, base: Int) -> Float {
        let S = t.sum, O = t.offsets
        var v: Float = 0
        for k in 0..<3 {
            let r = t.rects[f * 3 + k]
            if r.weight == 0 { continue }
            let o = f * 12 + k * 4
            v +=
                r.weight
                * Float(
                    S[base + Int(O[o + 3])] - S[base + Int(O[o + 1])] - S[base + Int(O[o + 2])]
                        + S[base + Int(O[o])])
        }
        return v
    }

    /// Whether an LBP feature's code at the window at `base` lies in the node's subset (the tree goes left).
    @inline(__always)
    func lbpPasses(_ t: ScanTables, feature f: Int, base: Int, subset: Int) -> Bool {
        let S = t.sum, L = t.lbpOffsets, p = f * 16
        @inline(__always) func blk(_ a: Int, _ b: Int, _ c: Int, _ d: Int) -> Int32 {
            S[base + Int(L[p + d])] - S[base + Int(L[p + b])] - S[base + Int(L[p + c])] + S[base + Int(L[p + a])]
        }
        let cv = blk(5, 6, 9, 10)
        var code = 0
        if blk(0, 1, 4, 5) >= cv { code |= 128 }
        if blk(1, 2, 5, 6) >= cv { code |= 64 }
        if blk(2, 3, 6, 7) >= cv { code |= 32 }
        if blk(6, 7, 10, 11) >= cv { code |= 16 }
        if blk(10, 11, 14, 15) >= cv { code |= 8 }
        if blk(9, 10, 13, 14) >= cv { code |= 4 }
        if blk(8, 9, 12, 13) >= cv { code |= 2 }
        if blk(4, 5, 8, 9) >= cv { code |= 1 }
        let word = t.subsets[subset + (code >> 5)]
        return (word & (1 << Int32(code & 31))) != 0
    }
}
