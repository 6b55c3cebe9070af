import Foundation
import Testing
import EvanescoCore
@testable import EvanescoIO

/// Depth readers against ../shared/data/depth and the golden files in its derived/ folders.
@Suite(.enabled(if: SharedData.available, SharedData.absent))
struct DepthRealFiles {
    func raw(_ rel: String, aux: Set<AuxiliaryKind> = []) throws -> DepthPhoto {
        var o = DepthReadOptions()
        o.decodePhoto = false
        o.sensorOrientation = true
        o.decodeAuxiliary = aux
        return try DepthReader.read(SharedData.path(rel), options: o)
    }

    func golden(_ rel: String) throws -> Image<UInt8> {
        try ImageCodecs.read(SharedData.path(rel), options: ReadOptions(applyOrientation: false)).image.firstChannel
            .uint8
    }

    @Test("pug.heic: the raw depth equals pug_depth.png pixel for pixel; the range equals the SEI and apdi values")
    func pug() throws {
        let p = try raw("depth/pug-iphone13pro/pug.heic", aux: [.gainmap])
        let d = try #require(p.depth)
        #expect(d.stored.uint8 == (try golden("depth/pug-iphone13pro/pug_depth.png")))
        #expect(
            d.kind == .disparity && d.accuracy == .relative && d.filtered == true && d.width == 768 && d.height == 576)
        #expect(d.declaredRange == 1.498046875...4.3828125)
        #expect(d.rangeNotes.first?.contains("agree") == true)
        #expect(d.calibration?.referenceWidth == 4032 && d.calibration?.intrinsics?[0] == 3032.59423828125)
        let gain = try #require(p.auxiliary(.gainmap))
        #expect(
            gain.image.uint8
                == (try golden("depth/pug-iphone13pro/derived/pug-urn_com_apple_photo_2020_aux_hdrgainmap.png")))
    }

    @Test("TrueDepth HEICs: every matte is listed and extracted equal to heif-convert's; depth range from SEI = apdi")
    func truedepthHEIC() throws {
        for name in ["heic_face_data", "heic_depth_data"] {
            let p = try raw("depth/truedepth-iphone/\(name).heic", aux: Set(AuxiliaryKind.allCases))
            let d = try #require(p.depth)
            #expect(d.stored.uint8 == (try golden("depth/truedepth-iphone/derived/\(name)-depth.png")))
            #expect(d.accuracy == .absolute)
            #expect(d.rangeNotes.first?.contains("agree") == true)
            var kinds = Set<AuxiliaryKind>()
            for a in p.auxiliary where a.type.hasPrefix("urn:com:apple") {
                let file =
                    "depth/truedepth-iphone/derived/\(name)-\(a.type.replacingOccurrences(of: ":", with: "_")).png"
                #expect(a.image.uint8 == (try golden(file)), "\(name) \(a.type)")
                kinds.insert(a.kind)
            }
            #expect(kinds.isSuperset(of: [.portrait, .skin, .hair, .teeth, .glasses]))
        }
        let face = try #require(try raw("depth/truedepth-iphone/heic_face_data.heic").depth)
        #expect(face.declaredRange == 0.49365234375...3.40234375)
    }

    @Test("jpeg_depth_data.jpg: MPF images byte-equal to exiftool's; disparity range from its apdi XMP")
    func appleJPEG() throws {
        let p = try raw("depth/truedepth-iphone/jpeg_depth_data.jpg")
        let d = try #require(p.depth)
        #expect(
            d.embeddedBytes
                == bytesOf(SharedData.path("depth/truedepth-iphone/derived/jpeg_depth_data.MPImage2_disparity.jpg")))
        #expect(
            p.auxiliary(.portrait)?.embeddedBytes
                == bytesOf(SharedData.path("depth/truedepth-iphone/derived/jpeg_depth_data.MPImage3_portraitmatte.jpg"))
        )
        #expect(d.declaredRange == 0.554199...2.808594)
        #expect(d.width == 480 && d.height == 640)
    }

    @Test(
        """
        Lens Blur GDepth: the map equals derived/gdepth_depthimage.png; auto polarity keeps the spec's, as GFocus \
        confirms
        """
    )
    func gdepth() throws {
        let p = try raw("depth/gdepth-lensblur/lensblur_gdepth_compound.jpg")
        let d = try #require(p.depth)
        #expect(d.embeddedBytes == bytesOf(SharedData.path("depth/gdepth-lensblur/derived/gdepth_depthimage.png")))
        #expect(d.stored.uint8 == (try golden("depth/gdepth-lensblur/derived/gdepth_depthimage.png")))
        #expect(d.declaredRange == 9.61550521850586...44.63623809814453)
        #expect(
            d.encoding == .rangeInverse(near: 9.61550521850586, far: 44.63623809814453, intMax: 255, nearIsHigh: false))
        #expect(d.rangeNotes.contains { $0.contains("spec (0 = near) chosen") })
        #expect(p.auxiliary(.original) != nil)
    }
}
