import EvanescoCore
import EvanescoIO
import Foundation

/// Why a cascade could not be loaded.
public enum CascadeError: Error, Equatable, CustomStringConvertible {
    case notFound(searched: [String])
    /// The cascade file given does not exist.
    case fileNotFound(path: String)
    case unreadable(path: String, detail: String)
    case unsupported(path: String, detail: String)

    public var description: String {
        switch self {
        case .fileNotFound(let p):
            "\(p): no such cascade file; check the path (OpenCV cascades are XML files such as "
                + "haarcascade_frontalface_default.xml)"
        case .notFound(let s):
            "no face cascade found (looked in \(s.joined(separator: ", "))); install Debian's opencv-data (apt-get "
                + "install opencv-data) or give a cascade file"
        case .unreadable(let p, let d): "\(p): not a usable OpenCV cascade (\(d))"
        case .unsupported(let p, let d): "\(p): \(d)"
        }
    }
}

/// A face (or object) found by a cascade, in pixels of the image searched.
public struct DetectedBox: Sendable, Equatable, Codable {
    /// The box's top-left corner and size, in pixels.
    public var x: Int, y: Int, width: Int, height: Int
    /// How many raw detections were grouped into this one.
    public var neighbors: Int
    /// - Parameters:
    ///   - x: Left edge.
    ///   - y: Top edge.
    ///   - width: Width.
    ///   - height: Height.
    ///   - neighbors: Raw detections grouped into the box.
    public init(x: Int, y: Int, width: Int, height: Int, neighbors: Int = 0) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
        self.neighbors = neighbors
    }
}

/// An OpenCV boosted cascade (the `opencv-cascade-classifier` XML of `opencv_traincascade`, Haar or
/// LBP features, stumps or small trees), evaluated on integral images the way OpenCV's
/// `CascadeClassifier::detectMultiScale` does: the image is scaled by 1/factor for each scale,
/// windows are scanned with a step of 2 (1 above factor 2, one more step after a first-stage
/// rejection), Haar features are normalised by the window's standard deviation, and the raw
/// hits are grouped (`groupRectangles`, eps 0.2).
public struct CascadeClassifier: Sendable {
    /// The feature type of a cascade.
    public enum Feature: String, Sendable { case haar, lbp }
    /// Haar or LBP.
    public let feature: Feature
    /// The detection window the cascade was trained on, in pixels.
    public let windowWidth: Int, windowHeight: Int
    /// The file the cascade came from.
    public let path: String

    struct Node { var left: Int32, right: Int32, feature: Int32, threshold: Float, subset: Int32 }
    struct Weak { var node: Int32, leaf: Int32 }
    struct Stage { var weakStart: Int32, weakCount: Int32, threshold: Float }
    struct HaarRect { var x: Int32, y: Int32, w: Int32, h: Int32, weight: Float }

    var stages: [Stage] = []
    var weaks: [Weak] = []
    var nodes: [Node] = []
    var leaves: [Float] = []
    var subsets: [Int32] = []
    /// Haar: up to 3 rects per feature (weight 0 pads); LBP: one rect per feature.
    var rects: [HaarRect] = []
    var rectsPerFeature = 3

    /// The default frontal-face cascade's file name and where Debian's opencv-data puts it.
    public static let defaultSearchPaths = [
        "/usr/share/opencv4/haarcascades/haarcascade_frontalface_default.xml",
        "/usr/share/opencv/haarcascades/haarcascade_frontalface_default.xml"
    ]

    /// Loads `path`, or the first of `defaultSearchPaths` that exists.
    public static func load(_ path: String? = nil) throws -> CascadeClassifier {
        if let path {
            guard FileManager.default.fileExists(atPath: path) else { throw CascadeError.fileNotFound(path: path) }
            return try CascadeClassifier(xml: try InputFile.read(path), path: path)
        }
        for p in defaultSearchPaths where FileManager.default.fileExists(atPath: p) {
            return try CascadeClassifier(xml: try InputFile.read(p), path: p)
        }
        throw CascadeError.notFound(searched: defaultSearchPaths)
    }

    /// Parses an OpenCV cascade XML document (untrusted: sizes and counts are checked).
    ///
    /// - Parameters:
    ///   - xml: The file's bytes.
    ///   - path: The file's name, for messages.
    /// - Throws: ``CascadeError`` when the document is not a cascade, uses an unsupported feature
    ///   type, or declares impossible sizes.
    public init(xml: [UInt8], path: String) throws {
        self.path = path
        var limits = XMPDocument.Limits()
        limits.maxElements = 2_000_000
        let doc: XMPDocument
        do { doc = try XMPDocument(xml, limits: limits) } catch {
            throw CascadeError.unreadable(path: path, detail: error.description)
        }
        guard let cascade = doc.elements("", "cascade").first else {
            throw CascadeError.unsupported(
                path: path,
                detail:
                    "no <cascade> element: old-format (opencv_haar_classifier) cascades are not supported; use the "
                    + "files of opencv-data 4.x"
            )
        }
        let reader = CascadeXML(path: path)
        guard reader.text(cascade, "stageType") == "BOOST" else {
            throw CascadeError.unsupported(path: path, detail: "only BOOST cascades are supported")
        }
        switch reader.text(cascade, "featureType") {
        case "HAAR": feature = .haar
        case "LBP": feature = .lbp
        case let t:
            throw CascadeError.unsupported(
                path: path, detail: "feature type \(t ?? "?") is not supported (HAAR and LBP are)")
        }
        guard let w = FileNumber.int(reader.text(cascade, "width"), in: 3...999),
            let h = FileNumber.int(reader.text(cascade, "height"), in: 3...999)
        else {
            throw CascadeError.unreadable(
                path: path, detail: "the window width/height is missing or not within 3...999")
        }
        windowWidth = w
        windowHeight = h
        guard let stagesEl = reader.child(cascade, "stages"), let featuresEl = reader.child(cascade, "features") else {
            throw CascadeError.unreadable(path: path, detail: "no <stages> or <features>")
        }
        let trees = try reader.stages(stagesEl, feature: feature)
        (stages, weaks, nodes, leaves, subsets) = (trees.stages, trees.weaks, trees.nodes, trees.leaves, trees.subsets)
        rectsPerFeature = feature == .haar ? 3 : 1
        rects = try reader.features(featuresEl, feature: feature, width: w, height: h)
        let featureCount = rects.count / rectsPerFeature
        guard !stages.isEmpty, nodes.allSatisfy({ $0.feature >= 0 && Int($0.feature) < featureCount }) else {
            throw CascadeError.unreadable(path: path, detail: "a node refers to a feature that does not exist")
        }
        // Every rect must lie inside the window (LBP: its 3x3 block grid).
        let k: Int32 = feature == .haar ? 1 : 3
        guard rects.allSatisfy({ $0.x >= 0 && $0.y >= 0 && $0.x + k * $0.w <= Int32(w) && $0.y + k * $0.h <= Int32(h) })
        else {
            throw CascadeError.unreadable(path: path, detail: "a feature rectangle lies outside the \(w)x\(h) window")
        }
    }

    /// Finds objects in a grey image. Boxes are in the image's pixels.
    ///
    /// - Parameters:
    ///   - grey: A one-channel image.
    ///   - scaleFactor: Scale step between searched sizes, clamped to 1.01...4 (NaN uses 1.1): a
    ///     smaller step would search thousands of scales.
    ///   - minNeighbors: Raw hits a box needs to be kept.
    ///   - minSize: Smallest window searched, in pixels.
    ///   - maxSize: Largest window searched, in pixels.
    /// - Returns: The grouped boxes; empty for a multi-channel image.
    public func detect(
        _ grey: Image<UInt8>, scaleFactor: Double = 1.1, minNeighbors: Int = 3,
        minSize: Int = 0, maxSize: Int = .max
    ) -> [DetectedBox] {
        guard grey.channels == 1 else { return [] }
        let scaleFactor = scaleFactor.isNaN ? 1.1 : min(max(scaleFactor, 1.01), 4)
        var raw: [DetectedBox] = []
        var factor = 1.0
        while true {
            defer { factor *= scaleFactor }
            let winW = Int((Double(windowWidth) * factor).rounded()),
                winH = Int((Double(windowHeight) * factor).rounded())
            let sw = Int((Double(grey.width) / factor).rounded()), sh = Int((Double(grey.height) / factor).rounded())
            if sw - windowWidth <= 0 || sh - windowHeight <= 0 { break }
            if winW > maxSize || winH > maxSize { break }
            if winW < minSize || winH < minSize { continue }
            let img = factor == 1 ? grey : grey.resized(width: sw, height: sh, interpolation: .bilinear)
            let step = factor > 2 ? 1 : 2
            let hits = scan(img, step: step)
            for (x, y) in hits {
                raw.append(
                    DetectedBox(
                        x: Int((Double(x) * factor).rounded()), y: Int((Double(y) * factor).rounded()), width: winW,
                        height: winH))
            }
        }
        return Self.group(raw, minNeighbors: minNeighbors, eps: 0.2)
    }

    /// OpenCV's groupRectangles: cluster boxes whose sides differ by at most eps * mean size,
    /// average each cluster, keep clusters of more than `minNeighbors`, and drop boxes inside a
    /// stronger one.
    public static func group(_ boxes: [DetectedBox], minNeighbors: Int, eps: Double) -> [DetectedBox] {
        if minNeighbors <= 0 { return boxes }
        let n = boxes.count
        var parent = Array(0..<n)
        func find(_ i: Int) -> Int {
            var i = i
            while parent[i] != i {
                parent[i] = parent[parent[i]]
                i = parent[i]
            }
            return i
        }
        func similar(_ a: DetectedBox, _ b: DetectedBox) -> Bool {
            let delta = eps * Double(min(a.width, b.width) + min(a.height, b.height)) * 0.5
            return Double(abs(a.x - b.x)) <= delta && Double(abs(a.y - b.y)) <= delta
                && Double(abs(a.x + a.width - b.x - b.width)) <= delta
                && Double(abs(a.y + a.height - b.y - b.height)) <= delta
        }
        for i in 0..<n {
            for j in (i + 1)..<max(i + 1, n) where similar(boxes[i], boxes[j]) { parent[find(i)] = find(j) }
        }
        var sums: [Int: (x: Int, y: Int, w: Int, h: Int, n: Int)] = [:]
        for i in 0..<n {
            let r = find(i), b = boxes[i]
            let s = sums[r] ?? (0, 0, 0, 0, 0)
            sums[r] = (s.x + b.x, s.y + b.y, s.w + b.width, s.h + b.height, s.n + 1)
        }
        let classes: [DetectedBox] = sums.keys.sorted().map { k in
            let s = sums[k]!, inv = 1 / Double(s.n)
            // cvRound: half to even.
            func r(_ v: Int) -> Int { Int((Double(v) * inv).rounded(.toNearestOrEven)) }
            return DetectedBox(x: r(s.x), y: r(s.y), width: r(s.w), height: r(s.h), neighbors: s.n)
        }
        var out: [DetectedBox] = []
        for (i, r1) in classes.enumerated() where r1.neighbors > minNeighbors {
            var inside = false
            for (j, r2) in classes.enumerated() where i != j && r2.neighbors > minNeighbors {
                let dx = Int(Double(r2.width) * eps), dy = Int(Double(r2.height) * eps)
                if r1.x >= r2.x - dx && r1.y >= r2.y - dy && r1.x + r1.width <= r2.x + r2.width + dx
                    && r1.y + r1.height <= r2.y + r2.height + dy
                    && (r2.neighbors > max(3, r1.neighbors) || r1.neighbors < 3)
                {
                    inside = true
                    break
                }
            }
            if !inside { out.append(r1) }
        }
        return out
    }
}

/// Reads a cascade's XML: every number in the file must be finite; integers (indices, rectangle
/// corners) must be whole and in range before they are converted.
struct CascadeXML {
    let path: String

    func child(_ e: XMLElement, _ n: String) -> XMLElement? { e.children.first { $0.name == n } }
    func text(_ e: XMLElement?, _ n: String) -> String? { e.flatMap { child($0, n) }?.text.trimmingWhitespace }

    func numbers(_ s: String, _ what: String) throws -> [Double] {
        let v = s.split { $0.isWhitespace }.map { FileNumber.double($0) }
        guard v.allSatisfy({ $0 != nil }) else {
            throw CascadeError.unreadable(path: path, detail: "\(what) holds a value that is not a finite number")
        }
        return v.map { $0! }
    }

    /// Ranges passed here fit Int32, except the LBP subset words (read as UInt32 bit patterns).
    func index(_ v: Double, _ range: ClosedRange<Int>, _ what: String) throws -> Int32 {
        guard let i = FileNumber.int(exactly: v, in: range) else {
            throw CascadeError.unreadable(
                path: path,
                detail: "\(what) \(v) is not a whole number within \(range.lowerBound)...\(range.upperBound)")
        }
        return Int32(truncatingIfNeeded: i)
    }

    /// The stages and their trees, flattened.
    func stages(_ stagesEl: XMLElement, feature: CascadeClassifier.Feature) throws -> (
        stages: [CascadeClassifier.Stage], weaks: [CascadeClassifier.Weak], nodes: [CascadeClassifier.Node],
        leaves: [Float], subsets: [Int32]
    ) {
        var stages: [CascadeClassifier.Stage] = [], weaks: [CascadeClassifier.Weak] = []
        var nodes: [CascadeClassifier.Node] = [], leaves: [Float] = [], subsets: [Int32] = []
        let perNode = feature == .haar ? 4 : 3 + 8
        for st in stagesEl.children {
            guard let thr = FileNumber.double(text(st, "stageThreshold")), let wc = child(st, "weakClassifiers") else {
                throw CascadeError.unreadable(path: path, detail: "a stage without threshold or weak classifiers")
            }
            let start = weaks.count
            for weak in wc.children {
                let n = try numbers(text(weak, "internalNodes") ?? "", "internalNodes")
                let l = try numbers(text(weak, "leafValues") ?? "", "leafValues")
                guard n.count >= perNode, n.count % perNode == 0, !l.isEmpty, n.count / perNode < 10_000,
                    l.count < 10_000
                else {
                    throw CascadeError.unreadable(
                        path: path, detail: "a weak classifier with \(n.count) node values and \(l.count) leaves")
                }
                guard nodes.count < 1_000_000 else {
                    throw CascadeError.unreadable(path: path, detail: "more than 1,000,000 nodes")
                }
                weaks.append(CascadeClassifier.Weak(node: Int32(nodes.count), leaf: Int32(leaves.count)))
                nodes += try tree(n, leaves: l.count, perNode: perNode, feature: feature, subsets: &subsets)
                leaves += l.map { Float($0) }
            }
            stages.append(
                CascadeClassifier.Stage(
                    weakStart: Int32(start), weakCount: Int32(weaks.count - start), threshold: Float(thr)))
        }
        return (stages, weaks, nodes, leaves, subsets)
    }

    /// One weak classifier's nodes. A child is a later node of the same tree (i < child < m) or a
    /// leaf (-leaf <= 0): the evaluation walks forward only, so it always ends, and never leaves
    /// the tree.
    func tree(
        _ n: [Double], leaves: Int, perNode: Int, feature: CascadeClassifier.Feature, subsets: inout [Int32]
    ) throws -> [CascadeClassifier.Node] {
        let m = n.count / perNode
        var nodes: [CascadeClassifier.Node] = []
        for (i, k) in stride(from: 0, to: n.count, by: perNode).enumerated() {
            let children = try [n[k], n[k + 1]].map { v -> Int32 in
                v > 0
                    ? try index(v, (i + 1)...max(i + 1, m - 1), "a node's child")
                    : try index(v, -(leaves - 1)...0, "a node's leaf")
            }
            if children.contains(where: { $0 > 0 && Int($0) >= m }) {
                throw CascadeError.unreadable(path: path, detail: "a node's child points past its tree")
            }
            var node = CascadeClassifier.Node(
                left: children[0], right: children[1],
                feature: try index(n[k + 2], 0...1_000_000, "a feature index"),
                threshold: 0, subset: -1)
            if feature == .haar {
                node.threshold = Float(n[k + 3])
            } else {
                node.subset = Int32(subsets.count)
                subsets += try (0..<8).map {
                    try index(n[k + 3 + $0], Int(Int32.min)...Int(UInt32.max), "an LBP subset word")
                }
            }
            nodes.append(node)
        }
        return nodes
    }

    /// The features' rectangles: three per Haar feature (unused ones zero), one per LBP feature.
    func features(
        _ featuresEl: XMLElement, feature: CascadeClassifier.Feature, width w: Int, height h: Int
    ) throws -> [CascadeClassifier.HaarRect] {
        func rect(_ v: [Double], weight: Float) throws -> CascadeClassifier.HaarRect {
            CascadeClassifier.HaarRect(
                x: try index(v[0], 0...w, "a rect's x"), y: try index(v[1], 0...h, "a rect's y"),
                w: try index(v[2], 0...w, "a rect's width"), h: try index(v[3], 0...h, "a rect's height"),
                weight: weight)
        }
        var rects: [CascadeClassifier.HaarRect] = []
        for f in featuresEl.children {
            if feature == .haar {
                if text(f, "tilted") == "1" {
                    throw CascadeError.unsupported(path: path, detail: "tilted Haar features are not supported")
                }
                guard let rs = child(f, "rects") else {
                    throw CascadeError.unreadable(path: path, detail: "a Haar feature without rects")
                }
                var got: [CascadeClassifier.HaarRect] = []
                for r in rs.children {
                    let v = try numbers(r.text, "a Haar rect")
                    guard v.count == 5 else {
                        throw CascadeError.unreadable(path: path, detail: "a Haar rect needs 5 numbers")
                    }
                    got.append(try rect(v, weight: Float(v[4])))
                }
                guard (1...3).contains(got.count) else {
                    throw CascadeError.unreadable(path: path, detail: "a Haar feature with \(got.count) rects")
                }
                while got.count < 3 { got.append(CascadeClassifier.HaarRect(x: 0, y: 0, w: 0, h: 0, weight: 0)) }
                rects += got
            } else {
                let v = try numbers(text(f, "rect") ?? "", "an LBP rect")
                guard v.count == 4 else {
                    throw CascadeError.unreadable(path: path, detail: "an LBP feature needs a rect of 4 numbers")
                }
                rects.append(try rect(v, weight: 1))
            }
        }
        return rects
    }
}
