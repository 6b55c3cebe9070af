import Foundation
import Testing
import EvanescoCore
@testable import EvanescoFaces

@Suite("Cascade classifier")
struct CascadeTests {
    /// A one-stage, one-stump Haar cascade on a 4x4 window: "left half darker than right half".
    static func tinyCascade(threshold: String = "0.01", tilted: Bool = false, root: String = "cascade") -> [UInt8] {
        Array(
            """
            <?xml version="1.0"?>
            <opencv_storage>
            <\(root) type_id="opencv-cascade-classifier"><stageType>BOOST</stageType>
              <featureType>HAAR</featureType><height>4</height><width>4</width>
              <stageParams><maxWeakCount>1</maxWeakCount></stageParams>
              <featureParams><maxCatCount>0</maxCatCount></featureParams>
              <stageNum>1</stageNum>
              <stages><_><maxWeakCount>1</maxWeakCount><stageThreshold>0.5</stageThreshold>
                <weakClassifiers><_><internalNodes>0 -1 0 \(threshold)</internalNodes><leafValues>-1. \
            1.</leafValues></_></weakClassifiers></_></stages>
              <features><_><rects><_>0 0 2 4 -1.</_><_>2 0 2 4 \
            1.</_></rects>\(tilted ? "<tilted>1</tilted>" : "")</_></features>
            </\(root)>
            </opencv_storage>
            """.utf8)
    }

    @Test("A hand-made stump finds dark-left/bright-right edges, nowhere else")
    func tiny() throws {
        let c = try CascadeClassifier(xml: Self.tinyCascade(), path: "tiny.xml")
        #expect(c.feature == .haar && c.windowWidth == 4)
        // Value = right - left (normalised): > 0.01 at a dark-to-bright step, 0 on flat grey, so the stump goes right
        // (leaf +1).
        let img = Image<UInt8>(width: 16, height: 8, channels: 1) { d in
            for y in 0..<8 { for x in 0..<16 { d[y * 16 + x] = x < 8 ? 10 : 200 } }
        }
        let hits = c.scan(img, step: 1)
        #expect(!hits.isEmpty && hits.allSatisfy { $0.0 >= 5 && $0.0 <= 7 }, "\(hits)")
        let flat = Image<UInt8>(width: 16, height: 8, channels: 1, samples: ContiguousArray(repeating: 90, count: 128))
        #expect(c.scan(flat, step: 1).isEmpty)
    }

    @Test("Unsupported or broken cascades give typed errors that say what to do")
    func errors() {
        #expect(throws: CascadeError.self) { try CascadeClassifier(xml: Self.tinyCascade(tilted: true), path: "t.xml") }
        #expect(throws: CascadeError.self) {
            try CascadeClassifier(xml: Self.tinyCascade(root: "haarcascade_old"), path: "old.xml")
        }
        #expect(throws: CascadeError.self) {
            try CascadeClassifier(xml: Array("<cascade><stageType>BOOST".utf8), path: "cut.xml")
        }
        #expect(CascadeError.notFound(searched: ["/x"]).description.contains("apt-get install opencv-data"))
        #expect(throws: CascadeError.fileNotFound(path: "/nonexistent.xml")) {
            try CascadeClassifier.load("/nonexistent.xml")
        }
    }

    @Test("groupRectangles: near-identical hits merge, lone hits are dropped, a box inside a stronger one goes")
    func grouping() {
        var boxes: [DetectedBox] = (0..<6).map { DetectedBox(x: 100 + $0, y: 50 + $0 % 2, width: 40, height: 40) }
        boxes.append(DetectedBox(x: 300, y: 300, width: 40, height: 40))  // lone
        boxes += (0..<4).map { _ in DetectedBox(x: 110, y: 60, width: 20, height: 20) }  // inside the first
        let g = CascadeClassifier.group(boxes, minNeighbors: 3, eps: 0.2)
        // Means 102.5 and 50.5 round half to even, as cvRound does.
        #expect(g == [DetectedBox(x: 102, y: 50, width: 40, height: 40, neighbors: 6)], "\(g)")
    }

    @Test("equalizeHist and area downscale: known answers")
    func preprocessing() {
        let img = Image<UInt8>(width: 4, height: 1, channels: 1, samples: [10, 10, 20, 30])
        #expect(Array(img.equalized().samples) == [0, 0, 128, 255])
        let a = Image<UInt8>(width: 4, height: 2, channels: 1, samples: [0, 100, 200, 40, 0, 100, 200, 40])
        #expect(Array(a.areaResized(width: 2, height: 1).samples) == [50, 120])
    }
}
