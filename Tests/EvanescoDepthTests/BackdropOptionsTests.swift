import EvanescoCore
import Foundation
import Testing
@testable import EvanescoDepth

@Suite("Backdrop options own their defaults and ranges")
struct BackdropOptionsTests {
    @Test("The defaults are the declared ones and pass validate()")
    func defaults() throws {
        let o = BackdropSessionOptions()
        #expect(Double(o.pipeline.cutoffOffset) == BackdropOptions.Limits.cutoffOffset.defaultValue)
        #expect(o.pipeline.gamma == Float(BackdropOptions.Limits.gamma.defaultValue!))
        #expect(
            o.pipeline.cutoffOffset == 0.25 && o.pipeline.gamma == 0.55 && o.pipeline.blurSigmaAt640 == 5.3
                && o.detectEvery == 10)
        try o.validate()
    }

    @Test("Every numeric setting refuses NaN, infinity and values out of range, naming itself")
    func refusals() {
        typealias Case = (setting: String, change: (inout BackdropSessionOptions) -> Void)
        let cases: [Case] = [
            ("cutoff offset", { $0.pipeline.cutoffOffset = .nan }),
            ("cutoff offset", { $0.pipeline.cutoffOffset = 10.5 }),
            ("blur", { $0.pipeline.blurSigmaAt640 = .infinity }), ("gamma", { $0.pipeline.gamma = 0 }),
            ("gamma", { $0.pipeline.gamma = -.infinity }),
            ("temporal weight", { $0.pipeline.temporalWeight = 0 }),
            ("temporal weight", { $0.pipeline.temporalWeight = 1.01 }),
            ("core depth", { $0.pipeline.coreDepth = .nan }), ("face detection interval", { $0.detectEvery = 0 }),
            ("blur radius", { $0.blurRadius = 201 }), ("face search size", { $0.faceWorkingSize = 10 }),
            ("smallest face", { $0.faceMinSize = 600 }), ("subject point", { $0.subject = .point(x: -1, y: 3) })
        ]
        for c in cases {
            var o = BackdropSessionOptions()
            c.change(&o)
            #expect(throws: SettingError.self, "\(c.setting)") { try o.validate() }
            do { try o.validate() } catch { #expect(error.setting == c.setting, "\(error)") }
        }
        var ok = BackdropSessionOptions()
        ok.pipeline.temporalWeight = 1
        ok.blurRadius = 0
        ok.subject = .point(x: 0, y: 0)
        #expect(throws: Never.self) { try ok.validate() }
    }
}

@Suite("Depth reports in the report convention")
struct DepthReportJSONTests {
    @Test("A backdrop frame's report is written with snake_case keys (times_s) and read back the same")
    func backdropFrameReportRoundTrips() throws {
        var times = StageTimings()
        times.mask = 0.004
        times.effect = 0.002
        let report = BackdropFrameReport(
            frame: 3, subject: .nearestRegion(percent: 5, fallback: nil), subjectDepth: 0.8,
            cutoff: 1.05, face: nil, faceHeldFromFrame: 1, times: times)
        let bytes = try ReportJSON.encode(report)
        let text = String(decoding: bytes, as: UTF8.self)
        #expect(
            text.contains("\"times_s\"") && text.contains("\"subject_depth\"")
                && text.contains("\"face_held_from_frame\""), "\(text)")
        #expect(try ReportJSON.decoder().decode(BackdropFrameReport.self, from: Data(bytes)) == report)
    }
}
