import ArgumentParser
import CHeif
import CKernels
import CPNG
import CTurboJPEG
import EvanescoAlign
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation
import EvanescoFaces

// The benchmarks, one method each (EvanescoBenchmarks NAME runs one; `all` the quick ones).
extension Bench {
    func decode() throws {
        let jpeg = try twelveMegapixelJPEG()
        let d = try ImageCodecs.decode(jpeg.bytes, path: jpeg.path)
        print("JPEG: \(jpeg.path) (\(d.image.width)x\(d.image.height), \(jpeg.bytes.count / 1000) kB)")
        try compare(
            "decode 12 MP JPEG (from memory)", "ImageCodecs.decode",
            { _ = try ImageCodecs.decode(jpeg.bytes, path: jpeg.path) },
            "bare tjDecompress2", { bareTurboJPEG(jpeg.bytes) })
        try compare(
            "decode 12 MP JPEG (from file)", "ImageCodecs.read", { _ = try ImageCodecs.read(jpeg.path) },
            "read + bare tjDecompress2", { bareTurboJPEG(try InputFile.read(jpeg.path)) })

        // A burst of PNG frames: highway's 51 (320x240 RGB, every row Sub-filtered), decoded one
        // after the other on one thread, by ImageCodecs (the plain-PNG reader) and by libpng alone.
        let pngDir = shared + "/data/bursts/highway/frames"
        if let names = burstFrames(pngDir) {
            let files = try names.map { try InputFile.read(pngDir + "/" + $0) }
            try compare(
                "decode highway's \(files.count) PNG frames", "ImageCodecs.decode",
                { for f in files { _ = try ImageCodecs.decode(f, path: "f.png") } },
                "bare libpng + zlib", { for f in files { bareLibpng(f) } })
        } else {
            print("highway PNGs: skipped, \(pngDir) is absent")
        }

        let heic = shared + "/data/depth/pug-iphone13pro/pug.heic"
        if FileManager.default.fileExists(atPath: heic) {
            let bytes = try InputFile.read(heic)
            try compare(
                "decode pug.heic 4032x3024", "ImageCodecs.decode", { _ = try ImageCodecs.decode(bytes, path: heic) },
                "bare heif_decode_image RGB", { bareLibheif(bytes) })
            if let tool = ["/usr/bin/heif-convert"].first(where: { FileManager.default.isExecutableFile(atPath: $0) }) {
                let out = NSTemporaryDirectory() + "evanesco-bench-pug.y4m"
                try compare(
                    "decode pug.heic, whole process", "ImageCodecs.read", { _ = try ImageCodecs.read(heic) },
                    "heif-convert to .y4m",
                    {
                        try runTool(tool, [heic, out])
                        try? FileManager.default.removeItem(atPath: out)
                    })
            }
        } else {
            print("pug.heic: skipped, \(heic) is absent")
        }
    }

    func warp(pathOnly: Bool) throws {
        // (warp-path: only the stacker's own path below.)
        let W = 4032, H = 3024
        let img = Image<UInt8>(uninitializedWidth: W, height: H, channels: 3) { d in
            for i in 0..<d.count { d[i] = UInt8(truncatingIfNeeded: i &* 2654435761 >> 13) }
        }
        let h = Homography([1.001, 0.004, 7.3, -0.004, 0.999, -3.1, 1e-7, -2e-7, 1])
        if !pathOnly {
            try compare(
                "warp 12 MP RGB8 homography", "bilinear + mask", { _ = img.warped(by: h, width: 4032, height: 3024) },
                "nearest + mask", { _ = img.warped(by: h, width: 4032, height: 3024, interpolation: .nearest) })
        }
        // The stacker's own path, one core: Catmull-Rom RGB8 through RowSampler in the stacker's
        // 544-px row segments (its tile width at 20 frames), the figure issue 11 asks for per pixel,
        // for a hand-held frame's map (a homography: shift, 0.23 degrees of roll, 0.1 % zoom and a
        // keystone), the same without the keystone (affine), a bare shift, and the homography with a
        // local alignment's field on top (16-px cells, the detail field at 12 MP, up to 3 px).
        var field = DisplacementField(width: W, height: H, cell: 16)
        for j in 0..<field.rows {
            for i in 0..<field.columns {
                field.dx[j * field.columns + i] = 3 * sinf(Float(i) / 25)
                field.dy[j * field.columns + i] = 2 * cosf(Float(j) / 19)
            }
        }
        for (kind, map, offsets) in [
            ("homography", h, nil), ("affine", Homography([1.001, 0.004, 7.3, -0.004, 0.999, -3.1, 0, 0, 1]), nil),
            ("shift", Homography.translation(7.3, -3.1), nil), ("homography + field", h, field)
        ] {
            if let only = only, only != kind { continue }
            let seg = BurstStacker.tileWidth(frames: 20, channels: 3)
            let sampler = RowSampler(frame: img, homography: map, interpolation: .catmullRom, offsets: offsets)
            let out = UnsafeMutablePointer<Float>.allocate(capacity: seg * 3),
                valid = UnsafeMutablePointer<UInt8>.allocate(capacity: seg)
            let cache = RowSampler<UInt8>.Cache(pixels: seg)
            defer {
                out.deallocate()
                valid.deallocate()
            }
            var runs: [Double] = []
            for _ in 0...repeats {
                let t = now()
                var x0 = 0
                while x0 < W {
                    let x1 = min(W, x0 + seg)
                    for y in 0..<H { sampler.sampleRow(y: y, x0: x0, x1: x1, into: out, valid: valid, cache: cache) }
                    x0 = x1
                }
                runs.append(now() - t)
            }
            let ns = median(Array(runs.dropFirst())) * 1e9 / Double(W * H)
            print(
                "warp 12 MP RGB8, stack path, 1 core   Catmull-Rom, \(seg)-px segments, \(kind)".padding(
                    toLength: 92, withPad: " ", startingAt: 0)
                    + String(format: "%.2f ns per output pixel", ns))
        }
        if !pathOnly {
            try compare(
                "resize 12 MP RGB8 to 1/4", "bilinear", { _ = img.resized(width: 1008, height: 756) },
                "bicubic", { _ = img.resized(width: 1008, height: 756, interpolation: .bicubic) })
        }
    }

    func align() throws {
        let dir = shared + "/data/bursts/synthetic/pug-handheld/frames"
        if FileManager.default.fileExists(atPath: dir) {
            let f0 = try ImageCodecs.read(dir + "/f00.jpg").image.uint8,
                f1 = try ImageCodecs.read(dir + "/f01.jpg").image.uint8
            try timeIt("align: grey pyramid of a 12 MP frame") { _ = GreyPyramid(f1) }
            try timeIt("align: reference (pyramid + template points)") { _ = RegistrationReference(f0) }
            let ref = RegistrationReference(f0)
            let pyr = GreyPyramid(f1)
            try timeIt("align: register one frame (given its pyramid)") {
                _ = try ref.register(pyramid: pyr, model: .homography)
            }
            try timeIt("align: register one frame (from pixels)") { _ = try ref.register(f1, model: .homography) }
            var o = RegistrationOptions()
            o.finestLevel = 1
            let half = RegistrationReference(f0, options: o)
            try timeIt("align: half-res pyramid of a 12 MP frame") { _ = half.framePyramid(f1) }
            try timeIt("align: register one frame at half res (from pixels)") {
                _ = try half.register(f1, model: .homography)
            }
            for k in 1..<6 {
                let f = try ImageCodecs.read(dir + String(format: "/f%02d.jpg", k)).image.uint8
                let t = now()
                let r = try half.register(f, model: .homography)
                print(
                    String(
                        format: "  frame %d: %.0f ms, %d iterations, residual %.2f, inliers %.2f", k,
                        (now() - t) * 1000, r.iterations, r.residual, r.inlierFraction))
            }
        } else {
            print("align: skipped, \(dir) is absent")
        }
    }

    func alignBurst() throws {
        // Where a burst's alignment time goes, frame by frame on one thread (the stacker runs two
        // frames at once), the stacker's steps: the reference's pyramid and template, then per frame
        // its pyramid, the registration down to a level above the finest, auto's coarse local look,
        // and then the full field continuing from the look where it finds parallax, or the
        // registration refined on to the finest level where it does not ("register" counts both
        // parts, with their iterations). Medians over frames in milliseconds, and the sum over the burst.
        let b = shared + "/data/bursts"
        for (name, dir) in [
            ("motorcycle-handheld", "/synthetic/motorcycle-handheld/frames"),
            ("motorcycle-parallax", "/synthetic/motorcycle-parallax/frames"),
            ("motorcycle-parallax-twin", "/synthetic/motorcycle-parallax-twin/frames"),
            ("hdrplus-tree", "/hdrplus-tree"),
            ("lowlight-handheld", "/lowlight-handheld"), ("vtest-pedestrians", "/vtest-pedestrians/frames"),
            ("highway", "/highway/frames"),
            ("pug-handheld", "/synthetic/pug-handheld/frames")
        ] {
            if let only = only, only != name { continue }
            let loaded = try BurstInput.load([b + dir])
            guard loaded.frames.count >= 2 else {
                print("align-burst: \(name) is absent, skipped")
                continue
            }
            let images = loaded.frames.map { $0.image.uint8 }
            let options = StackOptions().resolved(frames: images.count, pixels: images[0].width * images[0].height)
                .options
            var t = now()
            let ref = RegistrationReference(images[0], options: options.registration)
            let refMs = (now() - t) * 1000
            var pyr: [Double] = [], reg: [Double] = [], look: [Double] = [], full: [Double] = [], its: [Double] = []
            for img in images.dropFirst() {
                t = now()
                let p = ref.framePyramid(img)
                pyr.append((now() - t) * 1000)
                t = now()
                guard let r = try? ref.register(pyramid: p, model: .homography, finestLevel: ref.finestLevel(p) + 1)
                else { continue }
                var registerMs = (now() - t) * 1000, iterations = r.iterations
                let coarse = min(ref.pyramid.levels.count - 1, ref.pyramid.baseLevel + 2)
                t = now()
                let c = LocalAligner.estimate(
                    reference: ref.local, frame: p, homography: r.homography, options: options.localAlignment,
                    finestLevel: coarse)
                look.append((now() - t) * 1000)
                if c.statistics.p50Px >= options.localAlignment.parallaxThreshold * Float(1 << coarse) {
                    t = now()
                    _ = LocalAligner.estimate(
                        reference: ref.local, frame: p, homography: r.homography, options: options.localAlignment,
                        continuing: c)
                    full.append((now() - t) * 1000)
                } else {
                    t = now()
                    guard let f = try? ref.refineToFinest(r, pyramid: p) else { continue }
                    registerMs += (now() - t) * 1000
                    iterations = f.iterations
                }
                reg.append(registerMs)
                its.append(Double(iterations))
            }
            func cell(_ v: [Double]) -> String {
                v.isEmpty ? "-" : String(format: "%.2f (sum %.0f)", median(v), v.reduce(0, +))
            }
            print(
                "\(name) \(images.count) x \(images[0].width)x\(images[0].height): reference "
                    + "\(String(format: "%.1f", refMs)) ms; per frame: pyramid \(cell(pyr)), register \(cell(reg)) "
                    + "[\(String(format: "%.0f", its.isEmpty ? 0 : median(its))) iterations], coarse look "
                    + "\(cell(look)), full field \(cell(full)) on \(full.count) frames"
            )
        }
    }

    func backdrop() throws {
        // The anchor_backdrop.py set-up: each TrueDepth shot at each resolution (colour centre-cropped
        // to the aspect and area-resized, depth cropped to the same field of view and resized nearest),
        // 3 warm-up frames and 100 timed frames of the per-frame pipeline (cutoff, mask, blur, gamma,
        // upscale, blend); per resolution the median over shots of each shot's median.
        let dir = shared + "/data/rgbd/truedepth-frames"
        let ranges: [String: (Float, Float)] = [
            "heic_depth_data": (0.508301, 3.767578), "heic_face_data": (0.493652, 3.402344),
            "jpeg_depth_data": (0.554199, 2.808594)
        ]
        let bgFull = try ImageCodecs.read(shared + "/data/stereo/aloe/aloeL.jpg").image.uint8
        let cascade = try CascadeClassifier.load(shared + "/data/faces/cascades/haarcascade_frontalface_default.xml")
        var perRes: [String: [Double]] = [:]
        var order: [String] = []
        for shot in ranges.keys.sorted() {
            let color = try ImageCodecs.read("\(dir)/\(shot)_color.jpg").image.uint8
            let dpath =
                FileManager.default.fileExists(atPath: "\(dir)/\(shot)_disparity8.png")
                ? "\(dir)/\(shot)_disparity8.png" : "\(dir)/\(shot)_disparity8.jpg"
            let disp = try ImageCodecs.read(dpath).image
            let fmt = DepthEncoding.disparity8(min: Double(ranges[shot]!.0), max: Double(ranges[shot]!.1))
            let face = FaceFinder(cascade: cascade).find(in: .uint8(color)).first
            for (cw0, ch0, dw0, dh0) in [(640, 480, 320, 240), (1280, 720, 640, 480), (1920, 1080, 640, 480)] {
                let (cw, ch, dw, dh) = color.height > color.width ? (ch0, cw0, dh0, dw0) : (cw0, ch0, dw0, dh0)
                let (col, dep, box) = Self.backdropFrame(
                    color: color, disparity: disp, format: fmt, face: face, colorSize: (cw, ch), depthSize: (dw, dh))
                let pipe = BackdropPipeline(background: bgFull)
                var t: [Double] = [], tm: [Double] = [], tc: [Double] = []
                for i in 0..<103 {
                    let s0 = now()
                    let r = try pipe.process(color: col, depth: dep, face: box, subject: .face)
                    if i >= 3 {
                        t.append(now() - s0)
                        tm.append(r.info.maskMilliseconds)
                        tc.append(r.info.compositeMilliseconds)
                    }
                }
                if let dir = save {
                    // The frame after the timed ones, with its mask: to compare outputs before and after a change.
                    let r = try pipe.process(color: col, depth: dep, face: box, subject: .face, keepMask: true)
                    let base = "\(dir)/backdrop-\(shot)-\(cw0)x\(ch0)"
                    try ImageCodecs.write(.uint8(r.frame), to: base + ".png", options: WriteOptions(overwrite: true))
                    if let m = r.mask {
                        try ImageCodecs.write(.uint8(m), to: base + "-mask.png", options: WriteOptions(overwrite: true))
                    }
                }
                let key = "\(cw0)x\(ch0) (depth \(dw0)x\(dh0))"
                if perRes[key] == nil { order.append(key) }
                perRes[key, default: []].append(median(t) * 1000)
                print(
                    "backdrop \(shot) \(key): median \(String(format: "%.3f", median(t) * 1000)) ms/frame (mask "
                        + "\(String(format: "%.2f", median(tm))), composite \(String(format: "%.2f", median(tc)))), "
                        + "face \(box == nil ? "none (fallback)" : "found")"
                )
            }
        }
        for key in order {
            let m = median(perRes[key]!)
            print(
                "backdrop \(key): \(String(format: "%.3f", m)) ms/frame (median over shots), "
                    + "\(String(format: "%.0f", 1000 / m)) fps"
            )
        }
    }

    /// One backdrop frame as anchor_backdrop.py makes it: the colour centre-cropped to the
    /// aspect and area-resized, the depth cropped to the same field of view and resized nearest,
    /// the face box moved with them.
    static func backdropFrame(
        color: Image<UInt8>, disparity disp: AnyImage, format fmt: DepthEncoding, face: DetectedBox?,
        colorSize size: (Int, Int), depthSize dsize: (Int, Int)
    ) -> (Image<UInt8>, Image<Float>, DetectedBox?) {
        let (cw, ch) = size, (dw, dh) = dsize
        let aspect = Double(cw) / Double(ch)
        var rx = 0.0, ry = 0.0, rw = 1.0, rh = 1.0
        if Double(color.width) / Double(color.height) > aspect {
            rw = Double(color.height) * aspect / Double(color.width)
            rx = (1 - rw) / 2
        } else {
            rh = Double(color.width) / aspect / Double(color.height)
            ry = (1 - rh) / 2
        }
        let crop = color.cropped(
            x: Int(rx * Double(color.width)), y: Int(ry * Double(color.height)),
            width: Int(rw * Double(color.width)), height: Int(rh * Double(color.height)))
        let col = crop.luma().width > 0 ? crop.resized(width: cw, height: ch, interpolation: .bilinear) : crop
        let d8 = disp.uint8.withChannels(1)
        let dcrop = d8.cropped(
            x: Int(rx * Double(d8.width)), y: Int(ry * Double(d8.height)), width: Int(rw * Double(d8.width)),
            height: Int(rh * Double(d8.height)))
        let dep = fmt.metres(.uint8(dcrop.resized(width: dw, height: dh, interpolation: .nearest)))
        let box = face.map { f in
            DetectedBox(
                x: Int((Double(f.x) / Double(color.width) - rx) / rw * Double(cw)),
                y: Int((Double(f.y) / Double(color.height) - ry) / rh * Double(ch)),
                width: Int(Double(f.width) / Double(color.width) / rw * Double(cw)),
                height: Int(Double(f.height) / Double(color.height) / rh * Double(ch)))
        }
        return (col, dep, box)
    }

    func lensOracle() throws {
        // The fast lens renderer against the exact one (each pixel its own disc) on 1 MP crops of the
        // real depth photos (the whole photo when it is smaller), at the default aperture for the
        // photo's full size, focused at the crop's centre. PSNR of the 8-bit renderings.
        var worst = 99.0
        for (rel, focus) in lensPhotos {
            let path = shared + "/data/" + rel
            guard FileManager.default.fileExists(atPath: path) else {
                print("lens-oracle: \(rel) is absent, skipped")
                continue
            }
            let (r, c, _) = try lensSetup(path, focus: focus)
            let photo = r.image.uint8
            let side = 1024
            let cw = min(side, photo.width), ch = min(side, photo.height)
            let x0 = max(0, min(photo.width - cw, Int(focus.0 * Double(photo.width)) - cw / 2))
            let y0 = max(0, min(photo.height - ch, Int(focus.1 * Double(photo.height)) - ch / 2))
            let crop = photo.cropped(x: x0, y: y0, width: cw, height: ch),
                ccrop = c.cropped(x: x0, y: y0, width: cw, height: ch)
            for (name, lens) in [
                ("circle", LensBlur()), ("6 blades", LensBlur(shape: ApertureShape(blades: 6))),
                ("cat eye", LensBlur(catEye: 0.6))
            ] {
                let t0 = now()
                let fast = lens.apply(.uint8(crop), coc: ccrop).image.uint8
                let t1 = now()
                let exact = ReferenceLensBlur.render(crop, coc: ccrop, lens: lens)
                let t2 = now()
                var se = 0.0
                for i in 0..<fast.samples.count {
                    let d = Double(fast.samples[i]) - Double(exact.samples[i])
                    se += d * d
                }
                let p = 10 * log10(255 * 255 / max(se / Double(fast.samples.count), 1e-12))
                worst = min(worst, p)
                print(
                    String(
                        format: "lens-oracle %@ %dx%d %@: PSNR %.2f dB (fast %.0f ms, exact %.0f ms)",
                        (rel as NSString).lastPathComponent, cw, ch, name, p, (t1 - t0) * 1000, (t2 - t1) * 1000))
                if let dir = save {
                    let base =
                        dir + "/" + ((rel as NSString).lastPathComponent as NSString).deletingPathExtension + "-"
                        + name.replacingOccurrences(of: " ", with: "")
                    try ImageCodecs.write(.uint8(fast), to: base + "-fast.png", options: WriteOptions(overwrite: true))
                    try ImageCodecs.write(
                        .uint8(exact), to: base + "-exact.png", options: WriteOptions(overwrite: true))
                }
            }
        }
        print(String(format: "lens-oracle: worst PSNR %.2f dB (required: 35)", worst))
        if worst < 35 { throw ExitCode(1) }
    }

    func lens() throws {
        // Rendering only (decoded photo cached, as a studio slider would have it): lens blur at
        // apertures 10, 40 and 80 px against today's focal blur, alternated.
        let path = shared + "/data/depth/pug-iphone13pro/pug.heic"
        if FileManager.default.fileExists(atPath: path) {
            let r = try PortraitRenderer(contentsOf: path)
            var blur = PortraitSettings()
            blur.effect = .blur
            blur.focus = .point(PhotoPoint(x: 0.5, y: 0.5, fractional: true))
            for a: Float in [10, 40, 80] {
                var lens = blur
                lens.effect = .lens
                lens.aperture = a
                try compare(
                    "lens pug 12 MP aperture \(Int(a))", "lens", { _ = try r.render(lens) }, "blur radius 15",
                    { _ = try r.render(blur) })
            }
        } else {
            print("lens: skipped, \(path) is absent")
        }
    }

    func local() throws {
        // Local alignment of one frame against the reference: the coarse look auto makes on every
        // frame, and the full field (coarse to fine plus the detail pass).
        for (name, dir) in [
            ("motorcycle-parallax 741x500", "/data/bursts/synthetic/motorcycle-parallax/frames"),
            ("lowlight-handheld 1080x720", "/data/bursts/lowlight-handheld"),
            ("pug-handheld 4032x3024", "/data/bursts/synthetic/pug-handheld/frames")
        ] {
            let path = shared + dir
            guard let files = burstFrames(path) else {
                print("local: \(name) is absent, skipped")
                continue
            }
            let f0 = try ImageCodecs.read(path + "/" + files[0]).image.uint8,
                f1 = try ImageCodecs.read(path + "/" + files[1]).image.uint8
            var ro = RegistrationOptions()
            ro.finestLevel = f0.width * f0.height > 8_000_000 ? 1 : 0
            let ref = RegistrationReference(f0, options: ro)
            let pyr = ref.framePyramid(f1)
            let h = try ref.register(pyramid: pyr, model: .homography).homography
            let coarse = min(ref.pyramid.levels.count - 1, ref.pyramid.baseLevel + 2)
            try timeIt("local: coarse look, \(name)") {
                _ = LocalAligner.estimate(reference: ref.pyramid, frame: pyr, homography: h, finestLevel: coarse)
            }
            try timeIt("local: full field, \(name)") {
                _ = LocalAligner.estimate(reference: ref.pyramid, frame: pyr, homography: h)
            }
        }
        // The burst's fields made to agree with one scene (ParallaxConsistency), on the fields of
        // every frame of motorcycle-parallax against its first.
        let path = shared + "/data/bursts/synthetic/motorcycle-parallax/frames"
        guard let files = burstFrames(path) else { return }
        let ref = RegistrationReference(try ImageCodecs.read(path + "/" + files[0]).image.uint8)
        var fields: [DisplacementField?] = [nil], measured: [[Bool]?] = [nil]
        var samplers: [ParallaxConsistency.Sampler?] = [nil]
        for file in files.dropFirst() {
            let image = try ImageCodecs.read(path + "/" + file).image.uint8
            let pyr = ref.framePyramid(image)
            let h = try ref.register(pyramid: pyr, model: .homography).homography
            let la = LocalAligner.estimate(reference: ref.pyramid, frame: pyr, homography: h)
            fields.append(la.field)
            measured.append(la.measured)
            let sampler = RowSampler(frame: image, homography: h, interpolation: .bilinear)
            samplers.append({ sampler.grey(at: $0, into: $1) })
        }
        try timeIt("local: \(files.count - 1) fields made consistent") {
            _ = ParallaxConsistency.consolidate(fields, measured: measured)
        }
        // Then the depth sweep where most frames could not measure (the stacker's next step).
        let consistent = ParallaxConsistency.consolidated(fields, measured: measured)
        if let model = consistent.model {
            let cells = ParallaxConsistency.sweep(consistent.fields, model: model, samplers: samplers).1
            try timeIt("local: depth sweep, \(cells.sweptCells) cells of \(files.count - 1) fields") {
                _ = ParallaxConsistency.sweep(consistent.fields, model: model, samplers: samplers)
            }
        }
    }

    func kernels() throws {
        // The AVX2 kernels (CKernels) against the portable code they stand in for, alternated in one
        // process: the same results, so only the time differs. Skipped where the CPU has no AVX2.
        if evn_cpu_has_avx2() == 0 {
            print("kernels: this CPU has no AVX2, skipped")
        } else {
            let path = shared + "/data/bursts/synthetic/motorcycle-parallax/frames"
            if let files = burstFrames(path) {
                func both(_ name: String, _ body: () throws -> Void) throws {
                    try compare(
                        name, "AVX2",
                        {
                            evn_set_portable_kernels(0)
                            try body()
                        }, "portable",
                        {
                            evn_set_portable_kernels(1)
                            try body()
                        })
                    evn_set_portable_kernels(0)
                }
                let f0 = try ImageCodecs.read(path + "/" + files[0]).image.uint8,
                    f1 = try ImageCodecs.read(path + "/" + files[1]).image.uint8
                let ref = RegistrationReference(f0)
                let pyr = ref.framePyramid(f1)
                let h = try ref.register(pyramid: pyr, model: .homography).homography
                try both("kernels: registration of a motorcycle-parallax frame (point samples)") {
                    _ = try ref.register(pyramid: pyr, model: .homography)
                }
                try both("kernels: full local field, motorcycle-parallax (Lucas-Kanade sums, plane warp)") {
                    _ = LocalAligner.estimate(reference: ref.local, frame: pyr, homography: h)
                }
                let frames = try files.map { BurstFrame(name: $0, image: try ImageCodecs.read(path + "/" + $0).image) }
                try both("kernels: stack of motorcycle-parallax from decoded frames (all of them)") {
                    _ = try BurstStacker.stack(frames)
                }
            } else {
                print("kernels: motorcycle-parallax is absent, skipped")
            }
        }
    }

    func stack() throws {
        // The fused warp + merge of a whole burst from decoded frames (no decode, no encode): the
        // library call the CLI makes, robust merge, default alignment; medians of repeats runs.
        for (name, dir) in [
            ("pug-handheld 20 x 12 MP", "/data/bursts/synthetic/pug-handheld/frames"),
            ("motorcycle-handheld 20 x 741x500", "/data/bursts/synthetic/motorcycle-handheld/frames")
        ] {
            let path = shared + dir
            guard let files = burstFrames(path) else {
                print("stack: \(name) is absent, skipped")
                continue
            }
            let frames = try files.map { BurstFrame(name: $0, image: try ImageCodecs.read(path + "/" + $0).image) }
            var total: [Double] = [], warp: [Double] = [], merge: [Double] = [], fused: [Double] = [],
                align: [Double] = []
            for _ in 0..<repeats {
                let t = now()
                let r = try BurstStacker.stack(frames)
                total.append(now() - t)
                warp.append(r.timings.warp ?? 0)
                merge.append(r.timings.merge ?? 0)
                fused.append(r.timings.warpMerge ?? 0)
                align.append(r.timings.align ?? 0)
            }
            let px = Double(frames[0].image.width * frames[0].image.height * frames.count)
            print(
                String(
                    format:
                        "stack %@: total %.3f s, align %.3f s, warp+merge wall %.3f s (warp %.3f s = %.1f ns per "
                        + "pixel per frame of thread time, merge %.3f s)",
                    name, median(total), median(align), median(fused), median(warp),
                    median(warp) * 1e9 / px * Double(ProcessInfo.processInfo.activeProcessorCount), median(merge)))
        }
    }

    func queue() async throws {
        // Needs a PostgreSQL server: Benchmarks/batch-vs-queue.sh runs this beside a private cluster.
        guard
            let url = ProcessInfo.processInfo.environment["EVANESCO_QUEUE"]
                ?? ProcessInfo.processInfo.environment["EVANESCO_TEST_DATABASE_URL"]
        else {
            throw ValidationError("queue: set EVANESCO_QUEUE=postgres://... (or run Benchmarks/batch-vs-queue.sh)")
        }
        try await queueBenchmark(url: url)
    }
}
