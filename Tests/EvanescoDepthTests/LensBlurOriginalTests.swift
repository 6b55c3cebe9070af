import EvanescoCore
import EvanescoIO
import Foundation
import Testing
@testable import EvanescoDepth

@Suite("A Lens Blur (GDepth) photo is rendered from its GImage original", .enabled(if: Shared.available, Shared.absent))
struct LensBlurOriginalTests {
    static let file = Shared.root + "/depth/gdepth-lensblur/lensblur_gdepth_compound.jpg"
    static let original = Shared.root + "/depth/gdepth-lensblur/derived/gimage_original.jpg"

    @Test(
        """
        The photo read is the original (not the blurred primary); the spotlight keeps the original's pixels inside \
        the mask and differs from the primary's spotlight
        """
    )
    func spotlightFromOriginal() throws {
        let read = try DepthReader.read(Self.file)
        #expect(read.photoSource?.contains("GImage original") == true)
        let original = try ImageCodecs.read(Self.original).image.uint8
        let primary = try ImageCodecs.read(Self.file).image.uint8
        let photo = try #require(read.photo).image.uint8
        #expect(photo.samples == original.samples)
        #expect(photo.samples != primary.samples)

        var settings = PortraitSettings()
        settings.effect = .spotlight
        settings.focus = .normalized(0.8)
        let fromOriginal = try PortraitRenderer(contentsOf: Self.file).render(settings)
        // The same depth over the primary image: what every effect rendered before.
        var blurred = read
        blurred.photo?.image = .uint8(primary)
        blurred.photoSource = nil
        let fromPrimary = try PortraitRenderer(blurred).render(settings)
        let a = fromOriginal.image.uint8, b = fromPrimary.image.uint8
        #expect(a.samples != b.samples)
        // Inside the mask (fully in focus) the spotlight is the original's pixels.
        var inside = 0, worst = 0
        for i in 0..<(a.width * a.height) where fromOriginal.mask.samples[i] >= 0.999 {
            inside += 1
            for c in 0..<3 { worst = max(worst, abs(Int(a.samples[3 * i + c]) - Int(original.samples[3 * i + c]))) }
        }
        #expect(inside > a.width * a.height / 50, "\(inside) pixels in focus")
        #expect(worst <= 1, "the spotlight differs from the original by \(worst) inside the mask")
    }
}
