import EvanescoCore

/// A luma pyramid for registration: level 0 is the input's luma (0...255 scale, Float), each
/// further level halves the size by 2x2 averaging. Every level is lightly smoothed with a 3x3
/// binomial filter, which tames sensor noise and JPEG blocking before gradients are taken.
public struct GreyPyramid: Sendable {
    public let levels: [Image<Float>]

    /// Builds levels until the longer side would drop below `minSide`.
    public init<S: PixelSample>(_ image: Image<S>, minSide: Int = 48, maxLevels: Int = 10) {
        var lv: [Image<Float>] = [GreyPyramid.smooth(GreyPyramid.luma255(image))]
        var raw = lv[0]
        while lv.count < maxLevels, max(raw.width, raw.height) / 2 >= minSide, min(raw.width, raw.height) / 2 >= 8 {
            raw = GreyPyramid.halve(raw)
            lv.append(GreyPyramid.smooth(raw))
        }
        levels = lv
    }

    /// Rec.601 luma on a 0...255 scale, whatever the sample type.
    public static func luma255<S: PixelSample>(_ img: Image<S>) -> Image<Float> {
        let c = img.channels, n = img.pixelCount, k = 255 / S.fullScale, w = img.width
        return img.samples.withUnsafeBufferPointer { s in
            Image<Float>(width: img.width, height: img.height, channels: 1) { d in
                StripExecutor.forEachStrip(rows: img.height, minimumRows: 64) { rows in
                    let lo = rows.lowerBound * w, hi = min(n, rows.upperBound * w)
                    if c == 1 {
                        for i in lo..<hi { d[i] = s[i].floatValue * k }
                    } else {
                        for i in lo..<hi {
                            let o = i * c
                            d[i] = (0.299 * s[o].floatValue + 0.587 * s[o + 1].floatValue + 0.114 * s[o + 2].floatValue) * k
                        }
                    }
                }
            }
        }
    }

    /// 2x2 box average (odd last row/column dropped).
    static func halve(_ img: Image<Float>) -> Image<Float> {
        let w = img.width / 2, h = img.height / 2, sw = img.width
        return img.samples.withUnsafeBufferPointer { s in
            Image<Float>(width: w, height: h, channels: 1) { d in
                StripExecutor.forEachStrip(rows: h, minimumRows: 32) { rows in
                    for y in rows {
                        let r0 = 2 * y * sw, r1 = r0 + sw
                        for x in 0..<w { d[y * w + x] = 0.25 * (s[r0 + 2 * x] + s[r0 + 2 * x + 1] + s[r1 + 2 * x] + s[r1 + 2 * x + 1]) }
                    }
                }
            }
        }
    }

    /// Separable [1 2 1] / 4 smoothing, edges clamped.
    static func smooth(_ img: Image<Float>) -> Image<Float> {
        let w = img.width, h = img.height
        guard w >= 3, h >= 3 else { return img }
        let horizontal: Image<Float> = img.samples.withUnsafeBufferPointer { s in
            Image<Float>(width: w, height: h, channels: 1) { d in
                StripExecutor.forEachStrip(rows: h, minimumRows: 64) { rows in
                    for y in rows {
                        let r = y * w
                        d[r] = 0.75 * s[r] + 0.25 * s[r + 1]
                        for x in 1..<(w - 1) { d[r + x] = 0.25 * s[r + x - 1] + 0.5 * s[r + x] + 0.25 * s[r + x + 1] }
                        d[r + w - 1] = 0.25 * s[r + w - 2] + 0.75 * s[r + w - 1]
                    }
                }
            }
        }
        return horizontal.samples.withUnsafeBufferPointer { s in
            Image<Float>(width: w, height: h, channels: 1) { d in
                StripExecutor.forEachStrip(rows: h, minimumRows: 64) { rows in
                    for y in rows {
                        let up = max(y - 1, 0) * w, mid = y * w, down = min(y + 1, h - 1) * w
                        for x in 0..<w { d[mid + x] = 0.25 * s[up + x] + 0.5 * s[mid + x] + 0.25 * s[down + x] }
                    }
                }
            }
        }
    }
}
