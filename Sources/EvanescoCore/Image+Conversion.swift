extension Image {
    /// Converts the sample type, rescaling so that full scale maps to full scale
    /// (UInt8 -> UInt16 is `v * 257`, UInt16 -> UInt8 is `round(v / 257)`, integers -> Float divide
    /// by full scale, Float -> integers clamp to 0...1 and round).
    @inlinable
    public func converted<T: PixelSample>(to: T.Type) -> Image<T> {
        if let same = self as? Image<T> { return same }
        let scale = T.fullScale / Sample.fullScale
        let n = samples.count
        return samples.withUnsafeBufferPointer { src in
            Image<T>(uninitializedWidth: width, height: height, channels: channels) { dst in
                let rowLen = rowLength
                StripExecutor.forEachStrip(rows: height, minimumRows: 64) { rows in
                    let lo = rows.lowerBound * rowLen, hi = min(n, rows.upperBound * rowLen)
                    for i in lo..<hi { dst[i] = T(clampingRounded: src[i].floatValue * scale) }
                }
            }
        }
    }

    /// Converts the channel count: 1 -> 3/4 replicates grey; 3/4 -> 1 takes Rec.601 luma
    /// (OpenCV's BGR2GRAY weights, what CIPhotoEffectMono approximates); 4 -> 3 drops alpha;
    /// 1/3 -> 4 adds an opaque alpha.
    @inlinable
    public func withChannels(_ target: Int) -> Image<Sample> {
        precondition((1...4).contains(target) && target != 2, "channel count must be 1, 3 or 4")
        if target == channels { return self }
        let (wr, wg, wb) = LumaWeights.rec601.weights
        let src = channels, w = width
        let opaque = Sample(clampingRounded: Sample.fullScale)
        return samples.withUnsafeBufferPointer { s in
            Image(uninitializedWidth: width, height: height, channels: target) { d in
                StripExecutor.forEachStrip(rows: height, minimumRows: 64) { rows in
                    for y in rows {
                        var si = y * w * src, di = y * w * target
                        for _ in 0..<w {
                            switch (src, target) {
                            case (1, _):
                                d[di] = s[si]
                                d[di + 1] = s[si]
                                d[di + 2] = s[si]
                                if target == 4 { d[di + 3] = opaque }
                            case (_, 1):
                                let l =
                                    wr * s[si].floatValue + wg * s[si + 1].floatValue + wb * s[si + 2].floatValue
                                d[di] = Sample(clampingRounded: l)
                            default:
                                d[di] = s[si]
                                d[di + 1] = s[si + 1]
                                d[di + 2] = s[si + 2]
                                if target == 4 { d[di + 3] = src == 4 ? s[si + 3] : opaque }
                            }
                            si += src
                            di += target
                        }
                    }
                }
            }
        }
    }

    /// A copy of a rectangle (clamped to the image).
    public func cropped(x: Int, y: Int, width w: Int, height h: Int) -> Image<Sample> {
        let x0 = max(0, min(x, width)), y0 = max(0, min(y, height))
        let x1 = max(x0, min(x + w, width)), y1 = max(y0, min(y + h, height))
        let cw = x1 - x0, ch = y1 - y0, c = channels
        return samples.withUnsafeBufferPointer { s in
            Image(uninitializedWidth: cw, height: ch, channels: c) { d in
                for row in 0..<ch {
                    let so = ((y0 + row) * width + x0) * c
                    for i in 0..<(cw * c) { d[row * cw * c + i] = s[so + i] }
                }
            }
        }
    }
}
