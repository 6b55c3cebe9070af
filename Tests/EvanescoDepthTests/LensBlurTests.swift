import EvanescoCore
import EvanescoIO
import Foundation
import Testing
@testable import EvanescoDepth

@Suite("Lens blur")
struct LensBlurTests {
    @Test("A uniform photo stays uniform whatever the depth (layer seams leave no trace)")
    func uniformStaysUniform() {
        let w = 160, h = 120
        let photo = Image<UInt8>(width: w, height: h, channels: 3) { d in for i in 0..<(w * h) { d[3 * i] = 180; d[3 * i + 1] = 150; d[3 * i + 2] = 120 } }
        // A ramp of blur diameters from -30 (far) to +20 (near) across the photo, plus a step.
        let coc = Image<Float>(width: w, height: h, channels: 1) { d in
            for y in 0..<h { for x in 0..<w { d[y * w + x] = -30 + 50 * Float(x) / Float(w - 1) + (y > 60 ? 7 : 0) } }
        }
        for limit in [1_000_000, 5_000] {
        var lens = LensBlur(highlights: 1)
        lens.fullResolutionLimit = limit
        let r = lens.apply(.uint8(photo), coc: coc).image.uint8
        var worst = 0
        for i in 0..<(w * h) { for c in 0..<3 { worst = max(worst, abs(Int(r.samples[3 * i + c]) - Int(photo.samples[3 * i + c]))) } }
        #expect(worst <= 1, "a uniform photo changed by \(worst) levels (grid divisor \(lens.gridDivisor(width: w, height: h)))")
        }
    }
}

