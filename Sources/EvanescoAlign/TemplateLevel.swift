/// The template points of one pyramid level, as a structure of arrays that the Gauss-Newton
/// loops read 4 points a step: position (level pixels), value, agreement threshold and the
/// steepest-descent row (the value's derivative with respect to the 8 warp parameters, which in
/// the inverse-compositional formulation is fixed per point and computed once here).
struct TemplateLevel: Sendable {
    var width: Int, height: Int
    /// Normalisation: xn = (x - cx) / scale.
    var cx: Float, cy: Float, scale: Float
    /// Points selected.
    let count: Int
    /// Length of every array: `count` rounded up to a multiple of 4. The padding points have no
    /// sample (the loops mark them invalid) and a zero steepest-descent row.
    let padded: Int
    /// The first `hessianCount` points (a multiple of 4) are an even subset of all of them (every
    /// k-th in selection order, so spread over the frame like the rest): the Gauss-Newton matrix
    /// is summed over them only, the gradient over every point. The matrix only sets the step,
    /// the gradient where the iteration stops, so the estimate is the all-points one; a quarter
    /// of 40,000 points estimates an 8 x 8 matrix to a fraction of a percent.
    let hessianCount: Int
    let x: [Float], y: [Float], t: [Float]
    /// The largest residual at which each point agrees (grey levels): a fixed threshold plus
    /// what a fraction of a pixel's misalignment makes of its gradient.
    let agreement: [Float]
    /// d T / d p, component-major (`jacobian[c * padded + i]`), for the parameters of
    /// ``RegistrationReference/refine(_:_:_:parameters:iterations:tolerance:)``'s update
    /// `[1 + p0, p1, p2; p3, 1 + p4, p5; p6, p7, 1]` in normalised coordinates:
    /// `gx xn, gx yn, gx, gy xn, gy yn, gy, -xn (gx xn + gy yn), -yn (gx xn + gy yn)`, with the
    /// gradient per normalised unit. A shift uses components 2 and 5.
    let jacobian: [Float]

    /// The component of the steepest-descent row that parameter `q` of an `np`-parameter model
    /// (2, 6 or 8) reads.
    @inline(__always)
    static func component(_ q: Int, of np: Int) -> Int { np == 2 ? (q == 0 ? 2 : 5) : q }

    /// Points at (`x`, `y`) with values `t` and gradients (`gx`, `gy`) in level pixels, in
    /// selection order.
    init(width: Int, height: Int, x: [Float], y: [Float], t: [Float], gx: [Float], gy: [Float]) {
        self.width = width
        self.height = height
        cx = Float(width - 1) / 2
        cy = Float(height - 1) / 2
        scale = Float(max(width, height)) / 2
        count = x.count
        padded = (count + 3) & ~3
        // Every k-th point first (k = 1 up to 4096 points, then up to 4 as they grow), the rest
        // after, each in selection order.
        let k = min(4, max(1, count / 2048))
        let order = stride(from: 0, to: count, by: k).map { $0 } + (0..<count).filter { $0 % k != 0 }
        hessianCount = k == 1 ? padded : (count + k - 1) / k / 4 * 4
        let n = padded, s = scale
        var px = [Float](repeating: 0, count: n), py = px, pt = px, agree = px
        var jac = [Float](repeating: 0, count: 8 * n)
        for (i, o) in order.enumerated() {
            let xn = (x[o] - cx) / s, yn = (y[o] - cy) / s
            let gxn = gx[o] * s, gyn = gy[o] * s  // per normalised unit
            px[i] = x[o]
            py[i] = y[o]
            pt[i] = t[o]
            agree[i] =
                RegistrationReference.agreementThreshold + RegistrationReference.agreementShift
                * (gx[o] * gx[o] + gy[o] * gy[o]).squareRoot()
            let proj = gxn * xn + gyn * yn
            let row: [Float] = [gxn * xn, gxn * yn, gxn, gyn * xn, gyn * yn, gyn, -xn * proj, -yn * proj]
            for c in 0..<8 { jac[c * n + i] = row[c] }
        }
        self.x = px
        self.y = py
        self.t = pt
        agreement = agree
        jacobian = jac
    }
}
