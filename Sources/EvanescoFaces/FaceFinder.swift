import EvanescoCore
import EvanescoIO
import Foundation

extension Image where Sample == UInt8 {
    /// Histogram equalisation of a grey image (OpenCV's equalizeHist), as face detection expects.
    public func equalized() -> Image<UInt8> {
        precondition(channels == 1)
        var hist = [Int](repeating: 0, count: 256)
        for v in samples { hist[Int(v)] += 1 }
        guard let first = hist.firstIndex(where: { $0 > 0 }), hist[first] < pixelCount else { return self }
        let scale = 255.0 / Double(pixelCount - hist[first])
        var lut = [UInt8](repeating: 0, count: 256)
        var acc = 0
        for i in (first + 1)..<256 {
            acc += hist[i]
            lut[i] = UInt8(min(255, max(0, (Double(acc) * scale).rounded())))
        }
        return Image<UInt8>(uninitializedWidth: width, height: height, channels: 1) { d in
            for i in 0..<samples.count { d[i] = lut[Int(samples[i])] }
        }
    }
}

/// Face finding on photos and video frames: grey (Rec.601), downscaled to at most `workingSize`
/// on the long side by area averaging, histogram-equalised, then the cascade; boxes come back
/// in the input's pixels, largest first.
public struct FaceFinder: Sendable {
    /// The cascade run on each image.
    public var cascade: CascadeClassifier
    /// Images are scaled down so that their long side is at most this (faster, and what the cascade's
    /// window sizes suit).
    public var workingSize = 640
    /// Scale step between search scales (OpenCV's `scaleFactor`).
    public var scaleFactor = 1.1
    /// Raw detections a box needs to be kept (OpenCV's `minNeighbors`).
    public var minNeighbors = 5
    /// Smallest face, in working-size pixels.
    public var minSize = 40

    /// - Parameter cascade: The cascade to run.
    public init(cascade: CascadeClassifier) { self.cascade = cascade }

    /// Finds faces in an image.
    ///
    /// - Parameter image: Any image; colour is turned grey (Rec.601).
    /// - Returns: Boxes in the input's pixels, largest first; empty when there is none.
    public func find(in image: AnyImage) -> [DetectedBox] {
        let grey = image.uint8.luma(.rec601)
        let s = min(1, Double(workingSize) / Double(max(grey.width, grey.height)))
        let small =
            s < 1
            ? grey.areaResized(
                width: Int((Double(grey.width) * s).rounded()), height: Int((Double(grey.height) * s).rounded())) : grey
        let boxes = cascade.detect(
            small.equalized(), scaleFactor: scaleFactor, minNeighbors: minNeighbors, minSize: minSize)
        let kx = Double(grey.width) / Double(small.width), ky = Double(grey.height) / Double(small.height)
        return boxes.map { b in
            DetectedBox(
                x: Int(Double(b.x) * kx), y: Int(Double(b.y) * ky), width: Int(Double(b.width) * kx),
                height: Int(Double(b.height) * ky), neighbors: b.neighbors)
        }.sorted { $0.width * $0.height > $1.width * $1.height }
    }
}

extension Image where Sample == UInt8 {
    /// Downscale by area averaging (OpenCV's INTER_AREA for shrinking): each output pixel is the
    /// mean of the source area it covers, with fractional edge weights. One channel.
    public func areaResized(width nw: Int, height nh: Int) -> Image<UInt8> {
        precondition(channels == 1 && nw <= width && nh <= height && nw > 0 && nh > 0)
        func spans(_ n: Int, _ size: Int) -> [[(Int, Float)]] {
            let scale = Double(size) / Double(n)
            return (0..<n).map { o in
                let a = Double(o) * scale, b = Double(o + 1) * scale
                var taps: [(Int, Float)] = []
                var i = Int(a)
                while Double(i) < b && i < size {
                    let w = min(b, Double(i + 1)) - max(a, Double(i))
                    if w > 1e-9 { taps.append((i, Float(w / scale))) }
                    i += 1
                }
                return taps
            }
        }
        let xs = spans(nw, width), ys = spans(nh, height)
        var tmp = [Float](repeating: 0, count: nw * height)
        samples.withUnsafeBufferPointer { s in
            for y in 0..<height {
                for x in 0..<nw {
                    var acc: Float = 0
                    for (i, w) in xs[x] { acc += Float(s[y * width + i]) * w }
                    tmp[y * nw + x] = acc
                }
            }
        }
        return Image<UInt8>(uninitializedWidth: nw, height: nh, channels: 1) { d in
            for y in 0..<nh {
                for x in 0..<nw {
                    var acc: Float = 0
                    for (j, w) in ys[y] { acc += tmp[j * nw + x] * w }
                    d[y * nw + x] = UInt8(clampingRounded: acc)
                }
            }
        }
    }
}
