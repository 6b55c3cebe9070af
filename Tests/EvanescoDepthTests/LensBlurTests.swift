import EvanescoCore
import EvanescoIO
import Foundation
import Testing
@testable import EvanescoDepth
@testable import EvanescoIO

/// Linear light of a 16-bit sRGB sample.
private func lin16(_ v: UInt16) -> Double { Double(SRGB.toLinear(Float(v) / 65535)) }

/// PSNR in dB of two 8-bit images of the same geometry.
func psnr(_ a: Image<UInt8>, _ b: Image<UInt8>) -> Double {
    precondition(a.samples.count == b.samples.count)
    var se = 0.0
    for i in 0..<a.samples.count {
        let d = Double(a.samples[i]) - Double(b.samples[i])
        se += d * d
    }
    let mse = se / Double(max(1, a.samples.count))
    return mse == 0 ? 99 : 10 * log10(255 * 255 / mse)
}

/// A constant map.
private func flat(_ w: Int, _ h: Int, _ v: Float) -> Image<Float> {
    Image<Float>(width: w, height: h, channels: 1) { d in for i in 0..<(w * h) { d[i] = v } }
}

/// One white pixel at the centre of a black 16-bit photo.
private func point(_ n: Int) -> Image<UInt16> {
    var img = Image<UInt16>(width: n, height: n, channels: 3)
    for ch in 0..<3 { img.samples[((n / 2) * n + n / 2) * 3 + ch] = 65535 }
    return img
}

/// Horizontal and vertical extent, and area, of the pixels above half the disc's level.
private func measure(_ img: Image<UInt16>) -> (width: Int, height: Int, area: Int, energy: Double) {
    let n = img.width
    var peak = 0.0, energy = 0.0
    for i in 0..<(n * n) {
        let v = lin16(img.samples[3 * i])
        peak = max(peak, v)
        energy += v
    }
    var x0 = n, x1 = -1, y0 = n, y1 = -1, area = 0
    for y in 0..<n {
        for x in 0..<n where lin16(img.samples[3 * (y * n + x)]) > peak / 2 {
            area += 1
            x0 = min(x0, x)
            x1 = max(x1, x)
            y0 = min(y0, y)
            y1 = max(y1, y)
        }
    }
    return (x1 - x0 + 1, y1 - y0 + 1, area, energy)
}

/// A textured self-made scene with a floor receding to a far wall, a mid-distance box and a
/// near post, and its signed blur diameters for `aperture` with focus on the box.
func lensScene(_ w: Int = 128, _ h: Int = 96, aperture: Float = 24) -> (photo: Image<UInt8>, coc: Image<Float>) {
    var d = [Float](repeating: 0, count: w * h)
    let photo = Image<UInt8>(width: w, height: h, channels: 3) { px in
        for y in 0..<h {
            for x in 0..<w {
                let i = y * w + x
                var disparity: Float, r: Int, g: Int, b: Int
                if y > h / 2 {
                    disparity = 0.2 + 0.8 * Float(y - h / 2) / Float(h / 2)  // floor, nearer lower down
                    r = 120 + (x * 7 + y * 3) % 60
                    g = 100 + (x * 3) % 40
                    b = 70
                } else {
                    disparity = 0.1  // far wall with bright dots
                    let dot = (x % 16 == 5 && y % 12 == 4)
                    r = dot ? 255 : 90 + (x * 5) % 30
                    g = dot ? 255 : 110 + (y * 9) % 30
                    b = dot ? 240 : 150
                }
                if x >= w / 3 && x < w / 3 + w / 5 && y >= h / 4 && y < h / 4 + h / 3 {
                    disparity = 0.55
                    r = 200
                    g = 60 + (x * y) % 50
                    b = 40
                }
                if x >= 4 * w / 5 && x < 4 * w / 5 + 6 {
                    disparity = 0.95
                    r = 30
                    g = 30
                    b = 35
                }  // near post
                d[i] = disparity
                px[3 * i] = UInt8(r)
                px[3 * i + 1] = UInt8(g)
                px[3 * i + 2] = UInt8(b)
            }
        }
    }
    let coc = Image<Float>(width: w, height: h, channels: 1) { c in
        for i in 0..<(w * h) { c[i] = aperture * (d[i] - 0.55) }
    }
    return (photo, coc)
}

@Suite("Lens blur")
struct LensBlurTests {
    @Test(
        "A uniform photo stays uniform whatever the depth (layer seams leave no trace), on the full and the half grid")
    func uniformStaysUniform() {
        let w = 160, h = 120
        let photo = Image<UInt8>(width: w, height: h, channels: 3) { d in
            for i in 0..<(w * h) {
                d[3 * i] = 180
                d[3 * i + 1] = 150
                d[3 * i + 2] = 120
            }
        }
        // A ramp of blur diameters from -30 (far) to +20 (near) across the photo, plus a step.
        let coc = Image<Float>(width: w, height: h, channels: 1) { d in
            for y in 0..<h { for x in 0..<w { d[y * w + x] = -30 + 50 * Float(x) / Float(w - 1) + (y > 60 ? 7 : 0) } }
        }
        for limit in [1_000_000, 5_000] {
            var lens = LensBlur(highlights: 1)
            lens.fullResolutionLimit = limit
            let r = lens.apply(.uint8(photo), coc: coc).image.uint8
            let worst = zip(r.samples, photo.samples).map { abs(Int($0) - Int($1)) }.max() ?? 0
            #expect(
                worst <= 1,
                "a uniform photo changed by \(worst) levels (grid divisor \(lens.gridDivisor(width: w, height: h)))")
        }
    }

    @Test("A bright point at blur diameter 20 renders a disc of diameter 20 +- 1 px, its energy kept within 2 %")
    func pointBecomesDisc() {
        let r = LensBlur(highlights: 1).apply(.uint16(point(61)), coc: flat(61, 61, -20)).image.uint16
        let m = measure(r)
        #expect(abs(m.width - 20) <= 1 && abs(m.height - 20) <= 1, "disc \(m.width)x\(m.height)")
        let expectedArea = Double.pi * 100
        #expect(
            abs(Double(m.area) - expectedArea) / expectedArea < 0.05,
            "disc area \(m.area), a circle of diameter 20 has \(expectedArea)")
        #expect(abs(m.energy - 1) < 0.02, "energy \(m.energy) of 1")
        // In front of the focus plane the same.
        let front = measure(LensBlur(highlights: 1).apply(.uint16(point(61)), coc: flat(61, 61, 20)).image.uint16)
        #expect(front.area == m.area && abs(front.energy - 1) < 0.02)
    }

    @Test("--blades 6 turns the point into a hexagon: 20 px corner to corner, 17.3 px side to side, its area")
    func hexagon() {
        let lens = LensBlur(shape: ApertureShape(blades: 6), highlights: 1)
        let m = measure(lens.apply(.uint16(point(61)), coc: flat(61, 61, -20)).image.uint16)
        #expect(abs(m.width - 20) <= 1, "corner to corner \(m.width)")
        #expect(abs(Double(m.height) - 17.32) <= 1, "side to side \(m.height)")
        let hexArea = 3 * 3.0.squareRoot() / 2 * 100
        #expect(
            abs(Double(m.area) - hexArea) / hexArea < 0.05,
            "area \(m.area), a hexagon of circumradius 10 has \(hexArea)")
        #expect(abs(m.energy - 1) < 0.02)
        // Rotated by 30 degrees the corners point up.
        let turned = measure(
            LensBlur(shape: ApertureShape(blades: 6, rotation: 30), highlights: 1)
                .apply(.uint16(point(61)), coc: flat(61, 61, -20)).image.uint16)
        #expect(
            abs(turned.height - 20) <= 1 && abs(Double(turned.width) - 17.32) <= 1,
            "rotated \(turned.width)x\(turned.height)")
    }

    @Test("Clipped highlights are boosted by the gain (bokeh stays bright), unclipped light is not")
    func highlightsBoosted() {
        let boosted = measure(LensBlur(highlights: 3).apply(.uint16(point(61)), coc: flat(61, 61, -20)).image.uint16)
        #expect(abs(boosted.energy - 3) < 0.06, "energy \(boosted.energy), the gain is 3")
        // A mid-grey point is left alone.
        var grey = point(61)
        for i in 0..<grey.samples.count where grey.samples[i] > 0 { grey.samples[i] = 30000 }
        let g = measure(LensBlur(highlights: 3).apply(.uint16(grey), coc: flat(61, 61, -20)).image.uint16)
        #expect(abs(g.energy - lin16(30000)) / lin16(30000) < 0.02)
    }

    @Test("A sharp subject in front of a blurred background: no halo, neither way (within 3 levels)")
    func noHalo() {
        let w = 120, h = 90
        let inside = { (x: Int, y: Int) in x >= 40 && x < 80 && y >= 25 && y < 65 }
        let photo = Image<UInt8>(width: w, height: h, channels: 3) { d in
            for y in 0..<h {
                for x in 0..<w {
                    let o = 3 * (y * w + x)
                    if inside(x, y) {
                        d[o] = 30
                        d[o + 1] = 40
                        d[o + 2] = 50
                    } else {
                        d[o] = 230
                        d[o + 1] = 210
                        d[o + 2] = 190
                    }
                }
            }
        }
        let coc = Image<Float>(width: w, height: h, channels: 1) { d in
            for y in 0..<h { for x in 0..<w { d[y * w + x] = inside(x, y) ? 0 : -24 } }
        }
        let r = LensBlur(highlights: 1).apply(.uint8(photo), coc: coc).image.uint8
        let worst = zip(r.samples, photo.samples).map { abs(Int($0) - Int($1)) }.max() ?? 0
        #expect(worst <= 3, "subject or background changed by \(worst) levels")
    }

    @Test(
        """
        A blurred foreground edge over a sharp background: a soft transition over c/2 on both sides, the background \
        seen through it
        """
    )
    func partialOcclusion() {
        let w = 160, h = 60, edge = 80, c: Float = 20
        let a: [UInt16] = [60000, 8000, 8000], b: [UInt16] = [8000, 8000, 60000]  // red foreground, blue background
        let photo = Image<UInt16>(width: w, height: h, channels: 3) { d in
            for y in 0..<h { for x in 0..<w { for ch in 0..<3 { d[3 * (y * w + x) + ch] = x < edge ? a[ch] : b[ch] } } }
        }
        let coc = Image<Float>(width: w, height: h, channels: 1) { d in
            for y in 0..<h { for x in 0..<w { d[y * w + x] = x < edge ? c : 0 } }
        }
        let r = LensBlur(highlights: 1).apply(.uint16(photo), coc: coc).image.uint16
        // Fraction of background (blue) light along the middle row, from the red channel.
        let la = lin16(a[0]), lb = lin16(b[0])
        func background(_ x: Int) -> Double { (lin16(r.samples[3 * ((h / 2) * w + x)]) - la) / (lb - la) }
        let half = Int(c / 2)
        for x in 0..<(edge - half - 1) { #expect(abs(background(x)) < 0.01, "x \(x): \(background(x))") }
        for x in (edge + half + 1)..<w { #expect(abs(background(x) - 1) < 0.01, "x \(x): \(background(x))") }
        // The edge is half and half; c/4 inside the foreground the background shows through it.
        let mid = (background(edge - 1) + background(edge)) / 2
        #expect(abs(mid - 0.5) < 0.06, "at the edge \(mid)")
        #expect(
            background(edge - half / 2) > 0.08 && background(edge - half / 2) < 0.4,
            "c/4 inside the foreground: \(background(edge - half / 2))")
        #expect(
            background(edge + half / 2) > 0.6 && background(edge + half / 2) < 0.92,
            "c/4 outside: \(background(edge + half / 2))")
        // Monotonic across the transition.
        for x in (edge - half)..<(edge + half) { #expect(background(x + 1) >= background(x) - 0.01) }
    }

    @Test(
        """
        The fast renderer matches the exact reference (each pixel its own disc) within 35 dB on a self-made scene, \
        for every option
        """
    )
    func matchesReference() {
        let (photo, coc) = lensScene()
        let options: [(String, LensBlur)] = [
            ("circle", LensBlur()),
            ("6 blades", LensBlur(shape: ApertureShape(blades: 6, rotation: 15))),
            ("5 blades", LensBlur(shape: ApertureShape(blades: 5))),
            ("cat eye", LensBlur(catEye: 0.6)),
            ("highlights 4", LensBlur(highlights: 4))
        ]
        for (name, lens) in options {
            let fast = lens.apply(.uint8(photo), coc: coc).image.uint8
            let exact = ReferenceLensBlur.render(photo, coc: coc, lens: lens)
            let p = psnr(fast, exact)
            #expect(p >= 35, "\(name): \(p) dB")
        }
    }

    @Test("Cost does not grow with the square of the aperture: 4x the diameter, far less than 16x the gather taps")
    func linearCost() {
        let taps = [10, 40, 80].map { d -> Int in
            let k = LensKernel(diameter: Float(d), shape: ApertureShape())
            return k.rows.reduce(0) { $0 + 2 + $1.taps.count }
        }
        // Per output pixel: two prefix reads per row plus the edge pixels, O(diameter).
        #expect(Double(taps[2]) / Double(taps[1]) < 2.6, "taps \(taps)")
        #expect(Double(taps[1]) / Double(taps[0]) < 4.5, "taps \(taps)")
    }

    @Test("Golden images of each lens option on the self-made scene (regenerate with EVANESCO_UPDATE_GOLDEN=1)")
    func golden() throws {
        let (photo, coc) = lensScene(96, 72, aperture: 16)
        let options: [(String, LensBlur)] = [
            ("lens-circle", LensBlur()),
            ("lens-blades6", LensBlur(shape: ApertureShape(blades: 6))),
            ("lens-blades5-rot20", LensBlur(shape: ApertureShape(blades: 5, rotation: 20))),
            ("lens-cateye", LensBlur(catEye: 0.8)),
            ("lens-highlights1", LensBlur(highlights: 1))
        ]
        try checkGolden(options.map { ($0.0, $0.1.apply(.uint8(photo), coc: coc).image.uint8) })
    }

    @Test("Settings: aperture and f-number exclusive, blades, cat eye, highlights and NaN refused")
    func settingsValidated() {
        func refused(_ change: (inout PortraitSettings) -> Void) -> Bool {
            var s = PortraitSettings()
            s.effect = .lens
            change(&s)
            do {
                try s.validate()
                return false
            } catch { return true }
        }
        #expect(!refused { _ in })
        #expect(
            refused {
                $0.aperture = 10
                $0.fNumber = 2
            })
        #expect(refused { $0.aperture = .nan })
        #expect(refused { $0.aperture = 0 })
        #expect(refused { $0.fNumber = .infinity })
        #expect(refused { $0.shape = ApertureShape(blades: 2) })
        #expect(refused { $0.shape = ApertureShape(blades: 17) })
        #expect(!refused { $0.shape = ApertureShape(blades: 9, rotation: -40) })
        #expect(refused { $0.catEye = 1.5 })
        #expect(refused { $0.highlights = 0.5 })
        #expect(refused { $0.highlights = .nan })
    }

    @Test("A renderer of a self-made photo with a depth map renders lens blur; an f-number needs absolute depth")
    func rendererLens() throws {
        let (photo, coc) = lensScene()
        let disparity = Image<Float>(width: coc.width, height: coc.height, channels: 1) { d in
            for i in 0..<d.count { d[i] = coc.samples[i] / 24 + 0.55 + 0.5 }
        }
        let depth = DepthData(
            floatMap: disparity, kind: .disparity, units: "1/m", accuracy: .relative, source: "test map")
        let dp = DepthPhoto(
            path: "scene.png", format: .png, photo: DecodedImage(image: .uint8(photo), format: .png),
            width: photo.width, height: photo.height, depth: depth)
        let renderer = try PortraitRenderer(dp)
        var s = PortraitSettings()
        s.effect = .lens
        s.aperture = 24
        s.focus = .point(PhotoPoint(x: Double(photo.width / 3 + 5), y: Double(photo.height / 3)))
        let r = try renderer.render(s)
        #expect(r.report.lens?.aperturePixels == 24 && r.report.lens?.apertureFrom == "aperture")
        #expect(r.image.width == photo.width && r.mask.width == photo.width)
        // The box at the focus stays sharp, the far wall does not.
        let out = r.image.uint8
        #expect(out[photo.width / 3 + 10, photo.height / 3, 0] == photo[photo.width / 3 + 10, photo.height / 3, 0])
        #expect(psnr(out, photo) < 30)
        s.aperture = nil
        s.fNumber = 2.8
        #expect(throws: PortraitError.self) { try renderer.render(s) }
    }
}

@Suite("Lens blur and the portrait matte")
struct LensMatteTests {
    @Test(
        """
        The portrait matte snaps a coarse depth map's edge to the subject: background beside the subject blurs, the \
        subject stays sharp
        """
    )
    func matteSharpensTheEdge() throws {
        let w = 160, h = 96
        let subject = { (x: Int, y: Int) in x >= 60 && x < 100 && y >= 20 && y < 80 }
        let photo = Image<UInt8>(width: w, height: h, channels: 3) { d in
            for y in 0..<h {
                for x in 0..<w {
                    let o = 3 * (y * w + x)
                    if subject(x, y) {
                        d[o] = 60
                        d[o + 1] = 50
                        d[o + 2] = 40
                    } else {
                        d[o] = UInt8(150 + (x * 37 + y * 11) % 100)
                        d[o + 1] = 170
                        d[o + 2] = 200
                    }
                }
            }
        }
        // A coarse map (1/8 size) whose subject block is one cell wider on every side than the subject.
        let map = Image<Float>(width: w / 8, height: h / 8, channels: 1) { d in
            for y in 0..<(h / 8) {
                for x in 0..<(w / 8) { d[y * (w / 8) + x] = (x >= 6 && x < 13 && y >= 1 && y < 11) ? 2 : 0.5 }
            }
        }
        let matte = Image<UInt8>(width: w, height: h, channels: 1) { d in
            for y in 0..<h { for x in 0..<w { d[y * w + x] = subject(x, y) ? 255 : 0 } }
        }
        func render(withMatte: Bool) throws -> PortraitRendering {
            let aux =
                withMatte
                ? [
                    AuxiliaryImage(
                        kind: .portrait, type: "portrait matte", image: .uint8(matte), width: w, height: h,
                        source: "test")
                ] : []
            let dp = DepthPhoto(
                path: "subject.png", format: .png, photo: DecodedImage(image: .uint8(photo), format: .png),
                width: w, height: h,
                depth: DepthData(floatMap: map, kind: .disparity, units: "1/m", accuracy: .absolute, source: "test"),
                auxiliary: aux)
            var s = PortraitSettings()
            s.effect = .lens
            s.aperture = 20
            s.focus = .normalized(1)
            return try PortraitRenderer(dp).render(s)
        }
        let coarse = try render(withMatte: false), snapped = try render(withMatte: true)
        #expect(coarse.report.refinedWith == "none" && snapped.report.refinedWith == "portrait matte")
        // Background pixels 2-4 px left of the subject: in focus with the coarse map, blurred with the matte.
        var coarseSharp = 0, snappedSharp = 0
        for y in 30..<70 {
            for x in 56..<59 {
                coarseSharp += coarse.mask[x, y, 0] > 0 ? 1 : 0
                snappedSharp += snapped.mask[x, y, 0] > 0 ? 1 : 0
            }
        }
        #expect(
            coarseSharp > 100 && snappedSharp == 0,
            "in focus beside the subject: \(coarseSharp) with the coarse map, \(snappedSharp) with the matte")
        // The subject itself stays sharp (its pixels unchanged) with the matte, 3 px inside its edge.
        for y in 30..<70 { for x in [63, 96] { #expect(snapped.image.uint8[x, y, 0] == 60, "\(x),\(y)") } }
    }
}

@Suite("Lens blur on ../shared/data", .enabled(if: Shared.available, Shared.absent))
struct LensBlurRealFileTests {
    /// A crop of a real depth photo and its signed blur diameters at the default aperture for the
    /// photo's full size, focused at (fx, fy).
    static func crop(_ rel: String, focus fx: Double, _ fy: Double, side: Int) throws -> (Image<UInt8>, Image<Float>) {
        let r = try PortraitRenderer(contentsOf: Shared.root + "/" + rel)
        let f = try r.focusValue(.point(PhotoPoint(x: fx, y: fy, fractional: true))).value
        let a = PortraitRenderer.defaultAperture(width: r.image.width, height: r.image.height)
        let photo = r.image.uint8
        let cw = min(side, photo.width), ch = min(side, photo.height)
        let x0 = max(0, min(photo.width - cw, Int(fx * Double(photo.width)) - cw / 2))
        let y0 = max(0, min(photo.height - ch, Int(fy * Double(photo.height)) - ch / 2))
        // The map resized to the crop's pixels only (not the whole photo), then scaled to diameters.
        let sx = Double(r.normalized.map.width) / Double(photo.width),
            sy = Double(r.normalized.map.height) / Double(photo.height)
        let m = r.normalized.map
        let coc = Image<Float>(width: cw, height: ch, channels: 1) { d in
            for y in 0..<ch {
                for x in 0..<cw {
                    let u = min(max((Double(x0 + x) + 0.5) * sx - 0.5, 0), Double(m.width - 1)),
                        v = min(max((Double(y0 + y) + 0.5) * sy - 0.5, 0), Double(m.height - 1))
                    let u0 = Int(u), v0 = Int(v), u1 = min(u0 + 1, m.width - 1), v1 = min(v0 + 1, m.height - 1)
                    let tu = Float(u - Double(u0)), tv = Float(v - Double(v0))
                    let top = m[u0, v0, 0] + (m[u1, v0, 0] - m[u0, v0, 0]) * tu,
                        bot = m[u0, v1, 0] + (m[u1, v1, 0] - m[u0, v1, 0]) * tu
                    d[y * cw + x] = a * (top + (bot - top) * tv - f)
                }
            }
        }
        return (photo.cropped(x: x0, y: y0, width: cw, height: ch), coc)
    }

    @Test(
        """
        On crops of pug.heic, a TrueDepth HEIC and the Lens Blur GDepth photo, the fast renderer is within 35 dB of \
        the exact one
        """,
        arguments: [
            ("depth/pug-iphone13pro/pug.heic", 0.55, 0.55), ("depth/truedepth-iphone/heic_depth_data.heic", 0.5, 0.3),
            ("depth/gdepth-lensblur/lensblur_gdepth_compound.jpg", 0.5, 0.5)
        ])
    func matchesReferenceOnRealCrops(_ rel: String, _ fx: Double, _ fy: Double) throws {
        let (photo, coc) = try Self.crop(rel, focus: fx, fy, side: 160)
        let lens = LensBlur()
        let p = psnr(
            lens.apply(.uint8(photo), coc: coc).image.uint8, ReferenceLensBlur.render(photo, coc: coc, lens: lens))
        #expect(p >= 35, "\(rel): \(p) dB")
    }

    @Test(
        """
        --f-number on a TrueDepth photo: thin-lens aperture from its calibration and absolute disparity; refused on \
        relative depth
        """
    )
    func fNumber() throws {
        let r = try PortraitRenderer(contentsOf: Shared.root + "/depth/truedepth-iphone/heic_face_data.heic")
        let p = try r.physicalAperture(fNumber: 2.8)
        // fx 2720.7 px at 2316 px wide, pixel 1 um: F = 2.72 mm; diagonal 3.86 mm: F_eq = 30.5 mm;
        // disparity range 0.4937...3.4023 1/m: A = 2720.7 * 0.0305 / 2.8 * 2.909 = 86 px.
        #expect(abs(p.focalMM - 2.7207) < 0.001)
        #expect(abs(p.equivalentMM - 30.50) < 0.05, "\(p.equivalentMM)")
        #expect(abs(p.pixels - 86.2) < 0.5, "\(p.pixels)")
        // Two stops down, half the diameter.
        #expect(abs(try r.physicalAperture(fNumber: 5.6).pixels * 2 - p.pixels) < 0.01)
        let pug = try PortraitRenderer(contentsOf: Shared.root + "/depth/pug-iphone13pro/pug.heic")
        #expect(throws: PortraitError.self) { try pug.physicalAperture(fNumber: 2.8) }
        let gdepth = try PortraitRenderer(
            contentsOf: Shared.root + "/depth/gdepth-lensblur/lensblur_gdepth_compound.jpg")
        #expect(throws: PortraitError.self) { try gdepth.physicalAperture(fNumber: 2.8) }
    }
}
