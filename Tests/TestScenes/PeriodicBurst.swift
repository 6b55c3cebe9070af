import Foundation
import EvanescoCore

/// Scenes that more than one test target makes itself.
public enum TestScenes {
    /// A 200 x 150 periodic texture whose coarse correlation peaks at a wrong shift first, in
    /// channels chosen so that it shows in luma (which registration works on).
    public static func periodic() -> Image<UInt8> {
        Image<UInt8>(width: 200, height: 150, channels: 3) { d in
            for y in 0..<150 {
                for x in 0..<200 {
                    let v =
                        128 + 50 * sinf(Float(x) * 0.13) * cosf(Float(y) * 0.09) + 30 * sinf(Float(x + 2 * y) * 0.031)
                    let o = (y * 200 + x) * 3
                    d[o] = UInt8(clampingRounded: v)
                    d[o + 1] = UInt8(clampingRounded: 60 + v / 2)
                    d[o + 2] = UInt8(clampingRounded: 255 - v)
                }
            }
        }
    }

    /// Frame `k` of a burst over ``periodic()``: the scene moved by (k, -k/2) pixels, so its pixels
    /// map to frame 0's by the translation (-k, k/2), and a white block of 25 x 30 pixels that
    /// moves 30 pixels right from frame to frame (at x = 20 in frame 0).
    public static func periodicFrame(_ k: Int, scene: Image<UInt8> = periodic()) -> Image<UInt8> {
        var f = scene.warped(
            by: .translation(Double(k), Double(-k) / 2), width: 200, height: 150, interpolation: .catmullRom
        ).image
        for y in 60..<90 {
            for x in (20 + 30 * k)..<(45 + 30 * k) where x < 200 { for c in 0..<3 { f[x, y, c] = 255 } }
        }
        return f
    }
}
