import EvanescoCore
import EvanescoIO
import Foundation
import HTTPTestSupport
import SharedTestData
import SubprocessTestSupport
import TestScenes
import Testing

/// The studio in a real browser (Debian's chromium, driven over W3C WebDriver). With
/// EVANESCO_SCREENSHOTS=DIR it also saves a screenshot of each workspace there (the README's).
@Suite("Studio in a real browser", .serialized, .enabled(if: WebDriver.available, WebDriver.absent))
struct StudioBrowser {
    @Test(
        """
        Each workspace works in chromium: stack a burst, drag the focus slider, click to focus, a bad upload's \
        message, Ctrl-C cleans up
        """
    )
    func studioInChromium() async throws {
        let s = Scratch()
        try FileManager.default.createDirectory(atPath: s.file("photos/burst"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: s.file("tmp"), withIntermediateDirectories: true)
        for k in 0..<4 { try ImageCodecs.write(.uint8(StudioData.frame(k)), to: s.file("photos/burst/f\(k).png")) }
        let small = try gdepthPhoto(s, name: "photos/portrait.jpg")
        try ImageCodecs.write(.uint8(gradient(200, 150)), to: s.file("photos/beach.png"))
        _ = FileManager.default.createFile(
            atPath: s.file("broken.jpg"),
            contents: Data([0xFF, 0xD8, 0xFF, 0xE0, 0, 16]) + Data("JFIF".utf8) + Data(count: 40))
        let shots = ProcessInfo.processInfo.environment["EVANESCO_SCREENSHOTS"]
        var roots = [s.file("photos")]
        let pug = StudioData.release ? StudioData.pug : nil
        if let pug { roots.append(pug) }
        let pedestrians = StudioData.shared + "/bursts/vtest-pedestrians/frames"
        if shots != nil, StudioData.release, FileManager.default.fileExists(atPath: pedestrians),
            let face = StudioData.face
        {
            roots += [pedestrians, face]
        }
        let studio = try StudioProcess(roots, tmp: s.file("tmp"))
        #expect(
            studio.url.range(
                of: #"^studio: http://127\.0\.0\.1:[0-9]+/\?token=[0-9a-f]{48}$"#, options: .regularExpression) != nil,
            "\(studio.url)")
        let url = String(studio.url.dropFirst("studio: ".count))
        #expect(try FileManager.default.contentsOfDirectory(atPath: s.file("tmp")).count == 1)

        let browser: WebDriver
        do { browser = try await WebDriver() } catch {
            _ = studio.interrupt()
            throw error
        }
        do {
            // Without the token the page says what to do.
            try await browser.open(url.components(separatedBy: "?")[0])
            try await browser.wait(
                "document.body.dataset.ready === 'error'", what: "the page to notice the missing token")
            let noToken =
                try await browser.run("return document.querySelector('[data-testid=error-message]').textContent;")
                as? String ?? ""
            #expect(noToken.contains("token"))

            try await browser.open(url)
            try await browser.wait("document.body.dataset.ready === 'true'", what: "the file list")
            #expect(
                try await browser.run("return location.search;") as? String == "",
                "the token stays out of the address bar")
            let paths =
                try await browser.run(
                    "return [...document.querySelectorAll('[data-testid=file-item]')].map(e => e.dataset.path + ':' + "
                        + "e.dataset.kind);"
                ) as? [String] ?? []
            #expect(
                paths.contains("burst:burst") && paths.contains("portrait.jpg:depth")
                    && paths.contains("beach.png:image"), "\(paths)")

            try await Self.burst(browser, roots: roots, shots: shots)
            try await Self.depth(browser, pug: pug != nil, shots: shots)
            try await Self.backdrop(browser, roots: roots, shots: shots)
            _ = small
            try await Self.badUpload(browser, s)

            // Cross-port forgery: a page served from another port of this machine is the same site
            // to the browser (the SameSite=Strict cookie goes along) but another origin. It tries
            // what the studio's page does; every attempt fails and nothing is stored.
            try await CrossPortPage.attack(browser: browser, studioURL: url, scratch: s)
        } catch {
            await browser.quit()
            _ = studio.interrupt()
            throw error
        }
        await browser.quit()

        // Ctrl-C: exits 0, prints nothing more, leaves no temporary files.
        let end = studio.interrupt()
        #expect(end.status == 0 && end.rest.isEmpty, "status \(end.status), stdout \(end.rest), stderr \(end.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: s.file("tmp")).isEmpty)
    }
}

extension StudioBrowser {
    /// Frame `k` of a burst where a red block stands still in frames 1 to 3 of 5 (the merge keeps
    /// it; the erase brush removes it). The test frame's square is off the picture.
    static func lingering(_ k: Int) -> Image<UInt8> {
        var f = StudioData.frame(20, width: 480, height: 320)
        if (1...3).contains(k) { f.paint(x: 280..<340, y: 150..<250, (200, 40, 30)) }
        return f
    }

    /// The most red over green on the block's column in the burst's result (a script for the page).
    static let red = """
        const img = document.querySelector('[data-testid=result-image]');
        const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
        const g = c.getContext('2d'); g.drawImage(img, 0, 0);
        let worst = -255;
        for (const x of [283, 310, 337]) { const d = g.getImageData(x, 200, 1, 1).data; worst = \
        Math.max(worst, d[0] - d[1]); }
        return worst;
        """

    /// The erase brush as a photographer uses it: stack a burst in which a block stood in 3 of
    /// 5 frames (the merge keeps it), switch the brush on, paint over the block, see it gone
    /// within a second of releasing; undo brings it back. With EVANESCO_SCREENSHOTS=DIR, the
    /// README's before and after pictures.
    @Test("The erase brush in chromium: paint over what stood still, it is gone within a second; undo")
    func eraseBrushInChromium() async throws {
        let s = Scratch()
        try FileManager.default.createDirectory(atPath: s.file("photos/square"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: s.file("tmp"), withIntermediateDirectories: true)
        for k in 0..<5 { try ImageCodecs.write(.uint8(Self.lingering(k)), to: s.file("photos/square/f\(k).png")) }
        let studio = try StudioProcess([s.file("photos")], tmp: s.file("tmp"))
        let url = String(studio.url.dropFirst("studio: ".count))
        let shots = ProcessInfo.processInfo.environment["EVANESCO_SCREENSHOTS"]
        let browser: WebDriver
        do { browser = try await WebDriver() } catch {
            _ = studio.interrupt()
            throw error
        }
        do {
            try await browser.open(url)
            try await browser.wait("document.body.dataset.ready === 'true'", what: "the file list")
            try await browser.click("[data-testid=file-item][data-path=square]")
            try await browser.wait(
                "document.querySelectorAll('[data-testid=frame-item]').length === 5", what: "the frame strip")
            try await browser.click("[data-testid=stack-button]")
            try await browser.wait(
                "document.querySelector('[data-testid=stack-progress]').textContent === 'done' && "
                    + "!document.querySelector('[data-testid=erase-button]').disabled",
                seconds: 120, what: "the stacked result")
            try await browser.wait(
                "document.querySelector('[data-testid=result-image]').naturalWidth === 480", what: "the result picture")
            #expect(try await browser.run(Self.red) as? Int ?? 0 > 100, "the merge keeps the block: 3 of 5 frames")
            try await browser.click("[data-testid=erase-button]")
            try await browser.wait("!document.querySelector('[data-testid=brush-canvas]').hidden", what: "the brush")
            if let shots { try await browser.screenshot(to: shots + "/studio-erase-before.png") }
            // Paint down the block with a brush wider than it, as a photographer would: some 20 points.
            try await browser.run(
                "const b = document.querySelector('[data-testid=brush-size]'); b.value = 90; b.dispatchEvent(new "
                    + "Event('input'));"
            )
            let path = (0...20).map { i in (310.0 / 480, (140.0 + 6 * Double(i)) / 320) },
                sampler = StudioData.RunQueueSampler()
            try await browser.stroke("[data-testid=brush-canvas]", through: path, milliseconds: 600)
            try await browser.wait(
                "document.querySelector('[data-testid=erase-status]').textContent.includes('1 stroke erased')",
                seconds: 30, what: "the erased result")
            try await browser.wait(
                "document.querySelector('[data-testid=result-image]').complete", what: "the new picture")
            let shown =
                Double(
                    try await browser.run(
                        "return document.querySelector('[data-testid=workspace-burst]').dataset.eraseShownMs || '-1';")
                        as? String ?? "-1") ?? -1
            // Within a second; a sanitized server runs several times slower, so there the check is
            // only that it comes.
            let budget = StudioData.budget(StudioData.sanitizedServer ? 15_000 : 1000.0, during: sampler.stop())
            #expect(
                shown >= 0 && shown < budget.ms,
                "the erased result was shown \(shown) ms after the release (\(budget.load))")
            #expect(try await browser.run(Self.red) as? Int ?? 255 < 40, "the block is gone")
            if let shots { try await browser.screenshot(to: shots + "/studio-erase-after.png") }
            try await browser.click("[data-testid=undo-button]")
            try await browser.wait(
                "document.querySelector('[data-testid=erase-status]').textContent.includes('no strokes')",
                what: "the undo")
            try await browser.wait(
                "document.querySelector('[data-testid=result-image]').complete", what: "the picture again")
            try await Task.sleep(for: .milliseconds(300))
            #expect(try await browser.run(Self.red) as? Int ?? 0 > 100, "undo brings the block back")
        } catch {
            await browser.quit()
            _ = studio.interrupt()
            throw error
        }
        await browser.quit()
        #expect(studio.interrupt().status == 0)
    }

    /// Chromium decodes the PNGs we write, at every setting, to the pixels written: a picture
    /// large enough for many pieces (1200 x 800 RGB: 11 IDAT chunks joined into one zlib stream),
    /// handed to the page as bytes and drawn through createImageBitmap into a canvas.
    @Test("Chromium reads our PNGs at every compression with the same pixels")
    func chromiumReadsOurPNGs() async throws {
        let w = 1200, h = 800
        var seed: UInt64 = 11
        let image = Image<UInt8>(width: w, height: h, channels: 3) { d in
            for i in 0..<d.count {
                seed = seed &* 6364136223846793005 &+ 1442695040888963407
                d[i] = UInt8(truncatingIfNeeded: (i / 3 % w) / 5 + (i / 3 / w) / 4 + Int(seed >> 61) + (i % 3) * 40)
            }
        }
        // FNV-1a over the RGB samples, as the page computes it over the canvas's RGBA.
        var want: UInt32 = 2_166_136_261
        for v in image.samples { want = (want ^ UInt32(v)) &* 16_777_619 }
        let browser = try await WebDriver()
        do {
            try await browser.open("about:blank")
            for compression in LosslessCompression.allCases {
                let png = try ImageCodecs.encode(
                    .uint8(image), format: .png, options: WriteOptions(compression: compression))
                let got =
                    try await browser.run(
                        """
                        const bytes = Uint8Array.from(atob(a[0]), (c) => c.charCodeAt(0));
                        const bitmap = await createImageBitmap(new Blob([bytes], { type: 'image/png' }));
                        const c = document.createElement('canvas'); c.width = bitmap.width; c.height = bitmap.height;
                        const g = c.getContext('2d'); g.drawImage(bitmap, 0, 0);
                        const d = g.getImageData(0, 0, c.width, c.height).data;
                        let hash = 2166136261;
                        for (let i = 0; i < d.length; i++) { if ((i & 3) !== 3) hash = \
                        Math.imul(hash ^ d[i], 16777619) >>> 0; }
                        return [c.width, c.height, hash];
                        """, [Data(png).base64EncodedString()]) as? [Any]
                let numbers = (got ?? []).compactMap { ($0 as? NSNumber)?.uint32Value }
                #expect(
                    numbers == [UInt32(w), UInt32(h), want], "\(compression): chromium read \(String(describing: got))")
            }
        } catch {
            await browser.quit()
            throw error
        }
        await browser.quit()
    }
}

/// A page on another local port that tries to use the studio: simple `text/plain` POSTs (no
/// preflight), a request with the page's header (needs a preflight), a read of the file list,
/// and a form posted into a frame.
enum CrossPortPage {
    static func attack(browser: WebDriver, studioURL url: String, scratch s: Scratch) async throws {
        let studioOrigin = String(url.prefix { $0 != "?" }.dropLast())  // http://127.0.0.1:PORT
        let port = Int(studioOrigin.split(separator: ":").last ?? "") ?? 0
        let token = String(url.split(separator: "=").last ?? "")
        let dir = s.file("evil")
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        let png = Data(try ImageCodecs.encode(.uint8(StudioData.frame(0)), format: .png)).base64EncodedString()
        let page = """
            <!doctype html><html><body><iframe name="sink"></iframe>
            <form id="f" method="POST" target="sink" enctype="text/plain" \
            action="\(studioOrigin)/api/upload?name=forged-form.png">
            <input name="x" value="y"></form>
            <script>
            window.results = {};
            const studio = '\(studioOrigin)';
            const png = Uint8Array.from(atob('\(png)'), c => c.charCodeAt(0));
            async function attempt(name, f) {
              try { const r = await f(); window.results[name] = r.type === 'opaque' ? 'sent' : String(r.status); }
              catch (e) { window.results[name] = 'blocked'; }
            }
            (async () => {
              const plain = { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'Content-Type': \
            'text/plain' } };
              await attempt('plain-upload', () => fetch(studio + '/api/upload?name=forged-plain.png', \
            { ...plain, body: png }));
              await attempt('plain-open', () => fetch(studio + '/api/burst/open', \
            { ...plain, body: JSON.stringify({ root: 0, path: 'burst' }) }));
              await attempt('header-upload', () => fetch(studio + '/api/upload?name=forged-header.png',
                { method: 'POST', credentials: 'include', headers: { 'X-Evanesco-Request': '1' }, body: png }));
              await attempt('read-files', () => fetch(studio + '/api/files', { credentials: 'include' }));
              document.getElementById('f').submit();
              await new Promise(r => setTimeout(r, 800));
              document.body.dataset.done = 'true';
            })();
            </script></body></html>
            """
        try page.write(toFile: dir + "/index.html", atomically: true, encoding: .utf8)
        let evilPort = try WebDriver.freePort()
        let server = try Subprocess(
            "/usr/bin/env",
            ["python3", "-m", "http.server", String(evilPort), "--bind", "127.0.0.1", "--directory", dir],
            stdout: .discard, stderr: .discard)
        // SIGKILL: a test process may have set SIGTERM to be ignored, which its children inherit.
        defer {
            server.send(SIGKILL)
            _ = server.finish(within: 10)
        }
        // Wait for it to listen.
        for _ in 0..<100 {
            if (try? HTTP1.blocking("GET", port: evilPort, path: "/index.html", timeout: 1))?.status == 200 { break }
            try await Task.sleep(for: .milliseconds(50))
        }
        try await browser.open("http://127.0.0.1:\(evilPort)/index.html")
        do {
            try await browser.wait(
                "document.body && document.body.dataset.done === 'true'", what: "the other page's attempts")
        } catch {
            let r = try? await browser.run("return JSON.stringify(window.results) + ' ' + location.href;")
            throw WebDriver.Failure(description: "\(error); results so far: \(String(describing: r))")
        }
        let results = try await browser.run("return JSON.stringify(window.results);") as? String ?? ""
        // The preflighted request and the read never get through; the simple ones are sent blind.
        #expect(
            results.contains(#""header-upload":"blocked""#) && results.contains(#""read-files":"blocked""#),
            "\(results)")
        // The studio stored nothing and opened nothing for it: its file list (read with the token
        // from here) has no forged upload.
        let list = try HTTP1.blocking("GET", port: port, path: "/api/files", headers: [("X-Evanesco-Token", token)])
        let listing = String(decoding: list.body, as: UTF8.self)
        #expect(list.status == 200 && !listing.contains("forged"), "\(listing.prefix(400))")
    }
}

extension StudioBrowser {
    /// Drags the focus slider across pug.heic with each effect, 40 previews each: their p95 from
    /// input to picture stays within the product's 100 ms (stretched on a busy machine). The
    /// figures go to stderr and to $EVANESCO_STUDIO_TIMINGS.
    static func dragTimings(_ browser: WebDriver) async throws {
        var report: [String] = []
        for effect in ["spotlight", "blur", "lens"] {
            try await browser.click("[data-testid=effect-\(effect)]")
            try await Task.sleep(for: .milliseconds(600))
            try await browser.run("window.studioTimings = [];")
            let sampler = StudioData.RunQueueSampler()
            try await browser.drag(
                "[data-testid=focus-slider]", from: 0.1, to: 0.9, steps: 40, milliseconds: 4000)
            try await Task.sleep(for: .milliseconds(800))
            let timings =
                try await browser.run(
                    "return window.studioTimings.filter(t => t.effect === '\(effect)').map(t => t.ms);")
                as? [Double] ?? []
            let p95 = timings.isEmpty ? .infinity : StudioData.percentile(timings, 95),
                p50 = timings.isEmpty ? .infinity : StudioData.percentile(timings, 50)
            report.append(
                String(format: "%@: %d previews, median %.0f ms, p95 %.0f ms", effect, timings.count, p50, p95))
            // The slowest three, with the server's share and the preview's size: a failure says where the time
            // went.
            let worst =
                try await browser.run(
                    "return window.studioTimings.filter(t => t.effect === '\(effect)').sort((a, b) => b.ms - "
                        + "a.ms).slice(0, 3).map(t => `${t.ms.toFixed(0)} ms (server ${t.serverMs.toFixed(0)} "
                        + "ms, ${t.size} px)`).join(', ');"
                ) as? String ?? ""
            let budget = StudioData.budget(100, during: sampler.stop())
            #expect(
                timings.count >= 10 && p95 <= budget.ms,
                """
                pug.heic \(effect): p95 \(p95) ms over \(timings.count) previews (\(budget.load)); \
                slowest: \(worst)
                """
            )
            report[report.count - 1] += " (slowest: \(worst); \(budget.load))"
        }
        let line = "studio focus slider on pug.heic: " + report.joined(separator: "; ")
        FileHandle.standardError.write(Data((line + "\n").utf8))
        if let out = ProcessInfo.processInfo.environment["EVANESCO_STUDIO_TIMINGS"] {
            try line.write(toFile: out, atomically: true, encoding: .utf8)
        }
    }
}

extension StudioBrowser {
    /// Burst: open, stack, see the result; progress within 1 s of pressing Stack.
    static func burst(_ browser: WebDriver, roots: [String], shots: String?) async throws {
        try await browser.click("[data-testid=file-item][data-path=burst]")
        try await browser.wait(
            "!document.querySelector('[data-testid=workspace-burst]').hidden && "
                + "document.querySelectorAll('[data-testid=frame-item]').length === 4",
            what: "the frame strip")
        try await browser.click("[data-testid=frame-item][data-index='1']")
        try await browser.wait(
            "document.querySelector('[data-testid=frame-item][data-index=\"1\"]').classList.contains('reference')",
            what: "frame 1 as the reference")
        try await browser.click("[data-testid=stack-button]")
        try await browser.wait(
            "document.querySelector('[data-testid=result-image]').naturalWidth > 0 && "
                + "document.querySelector('[data-testid=stack-progress]').textContent === 'done'",
            seconds: 120, what: "the stacked result")
        let first =
            Double(
                try await browser.run(
                    "return document.querySelector('[data-testid=workspace-burst]').dataset.firstProgressMs || "
                        + "'-1';"
                ) as? String ?? "-1") ?? -1
        let firstBudget = StudioData.budget(1000)
        #expect(first >= 0 && first < firstBudget.ms, "first progress after \(first) ms (\(firstBudget.load))")
        let statuses =
            try await browser.run(
                "return [...document.querySelectorAll('[data-testid=frame-status]')].map(e => e.textContent);")
            as? [String] ?? []
        #expect(
            statuses.count == 4 && statuses[1] == "reference"
                && statuses.filter { $0.hasPrefix("aligned") || $0.hasPrefix("as") }.count >= 2, "\(statuses)")
        #expect(
            try await browser.run("return document.querySelector('[data-testid=result-image]').naturalWidth;")
                as? Int == 160)
        // The merged picture has no square where frame 1 had it: sample it through a canvas.
        let dark =
            try await browser.run(
                """
                const img = document.querySelector('[data-testid=result-image]');
                const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = \
                img.naturalHeight;
                const g = c.getContext('2d'); g.drawImage(img, 0, 0);
                return g.getImageData(56, 55, 1, 1).data[0];
                """) as? Int ?? 0
        #expect(dark > 40, "the moving square should have vanished (red \(dark))")
        try await browser.run(
            "const s = document.querySelector('[data-testid=map-select]'); s.value = 'provenance'; "
                + "s.dispatchEvent(new Event('change'));"
        )
        try await browser.wait(
            "!document.querySelector('[data-testid=map-legend]').hidden", what: "the provenance legend")
        let href =
            try await browser.run(
                "return document.querySelector('[data-testid=download-png16]').getAttribute('href');") as? String
            ?? ""
        #expect(href.contains("format=png16"))
        if let shots, roots.count > 3 {
            try await browser.click("[data-testid=file-item][data-root='2'][data-path='.']")
            try await browser.wait(
                "document.querySelectorAll('[data-testid=frame-item]').length >= 10", seconds: 60,
                what: "the pedestrian frames")
            try await browser.click("[data-testid=stack-button]")
            try await browser.wait(
                "document.querySelector('[data-testid=stack-progress]').textContent === 'done' && "
                    + "document.querySelector('[data-testid=result-image]').naturalWidth > 160",
                seconds: 120, what: "the pedestrians stacked")
            try await browser.run(
                "const s = document.querySelector('[data-testid=map-select]'); s.value = 'result'; "
                    + "s.dispatchEvent(new Event('change'));"
            )
            try await Task.sleep(for: .milliseconds(800))
            try await browser.screenshot(to: shots + "/studio-burst.png")
        }
    }

    /// Depth: open, drag the focus slider, the preview changes; click to focus; the pug.heic
    /// slider timings on the release binary.
    static func depth(_ browser: WebDriver, pug: Bool, shots: String?) async throws {
        try await browser.click("[data-testid=file-item][data-path='portrait.jpg']")
        try await browser.wait(
            "!document.querySelector('[data-testid=workspace-depth]').hidden && "
                + "document.querySelector('[data-testid=preview-image]').naturalWidth > 0",
            what: "the depth preview")
        let facts =
            try await browser.run("return document.querySelector('[data-testid=depth-info]').textContent;")
            as? String ?? ""
        #expect(facts.contains("GDepth") && facts.contains("48×32"), "\(facts)")
        try await browser.click("[data-testid=view-mask]")
        let pixels = """
            const img = document.querySelector('[data-testid=preview-image]');
            const c = document.createElement('canvas'); c.width = img.naturalWidth; c.height = img.naturalHeight;
            const g = c.getContext('2d'); g.drawImage(img, 0, 0);
            const d = g.getImageData(0, 0, c.width, c.height).data; let left = 0, right = 0;
            for (let y = 0; y < c.height; y++) for (let x = 0; x < c.width; x++) { if (x < c.width / 2) left += \
            d[(y * c.width + x) * 4]; else right += d[(y * c.width + x) * 4]; }
            return [left / (c.width * c.height / 2), right / (c.width * c.height / 2)];
            """
        try await browser.run("window.studioTimings = [];")
        try await browser.drag("[data-testid=focus-slider]", from: 0.5, to: 0.98, steps: 12, milliseconds: 600)
        try await browser.wait(
            "window.studioTimings.length > 0 && "
                + "Number(document.querySelector('[data-testid=focus-slider]').value) > 0.9",
            what: "previews while dragging")
        try await Task.sleep(for: .milliseconds(500))
        let near = try await browser.run(pixels) as? [Double] ?? []
        try await browser.drag("[data-testid=focus-slider]", from: 0.98, to: 0.02, steps: 12, milliseconds: 600)
        try await browser.wait(
            "Number(document.querySelector('[data-testid=focus-slider]').value) < 0.1",
            what: "the slider at the far end")
        try await Task.sleep(for: .milliseconds(500))
        let far = try await browser.run(pixels) as? [Double] ?? []
        // Focus near: the near (left) half is in the mask; focus far: the right half is.
        #expect(
            near.count == 2 && far.count == 2 && near[0] > 200 && near[1] < 40 && far[0] < 40 && far[1] > 200,
            "near \(near), far \(far)")
        // Click on the left (near) half: the slider moves to the near end.
        try await browser.click("[data-testid=preview-image]", at: 0.2, 0.5)
        try await browser.wait(
            "Number(document.querySelector('[data-testid=focus-slider]').value) > 0.9", what: "click to focus")
        try await browser.click("[data-testid=view-filtered]")
        try await browser.click("[data-testid=effect-blur]")
        try await browser.wait(
            "document.querySelector('[data-testid=render-ms]').textContent !== ''", what: "a blurred preview")

        if pug {
            try await browser.click("[data-testid=file-item][data-path='pug.heic']")
            try await browser.wait(
                "document.querySelector('[data-testid=preview-image]').naturalWidth >= 1200", seconds: 60,
                what: "the pug preview")
            try await Self.dragTimings(browser)
            try await browser.click("[data-testid=effect-blur]")
            try await browser.run(
                "const f = document.querySelector('[data-testid=focus-slider]'); f.value = 0.62; "
                    + "f.dispatchEvent(new Event('input')); f.dispatchEvent(new Event('change'));"
            )
            try await Task.sleep(for: .milliseconds(1500))
            if let shots { try await browser.screenshot(to: shots + "/studio-depth.png") }
        } else {
            FileHandle.standardError.write(
                Data(
                    ("studio browser test: the pug.heic slider timing runs on the release binary "
                        + "(EVANESCO_BIN=.build/release/evanesco) with ../shared/data present; not this time\n")
                        .utf8))
        }
    }

    /// Backdrop: open the portrait here, a background, the composite and the mask.
    static func backdrop(_ browser: WebDriver, roots: [String], shots: String?) async throws {
        try await browser.click("[data-testid=tab-backdrop]")
        try await browser.click(
            "[data-testid=file-item][data-path='\(roots.count > 3 ? "heic_face_data.heic" : "portrait.jpg")']")
        try await browser.wait(
            "document.querySelector('[data-testid=backdrop-image]').naturalWidth > 0 && "
                + "document.querySelector('[data-testid=backdrop-mask]').naturalWidth > 0",
            seconds: 60, what: "the backdrop composite")
        try await browser.run(
            "const s = document.querySelector('[data-testid=background-select]'); s.value = [...s.options].find(o "
                + "=> o.textContent === 'beach.png').value; s.dispatchEvent(new Event('change'));"
        )
        try await browser.wait(
            "document.querySelector('[data-testid=backdrop-progress]').textContent.includes('cutoff')",
            what: "the backdrop facts")
        // The sliders' defaults and ranges came from the library (GET /api/backdrop/settings).
        let sliders =
            try await browser.run(
                "return ['cutoffOffset', 'blur', 'gamma'].map(f => { const s = "
                    + "document.querySelector(`[data-testid=${f}-slider]`); return [s.value, s.min, s.max, "
                    + "s.disabled].join(' '); }).join('; ');"
            ) as? String
        #expect(sliders == "0.25 0 2 false; 5.3 0 30 false; 0.55 0.1 3 false", "\(sliders ?? "nil")")
        try await Task.sleep(for: .milliseconds(800))
        if let shots { try await browser.screenshot(to: shots + "/studio-backdrop.png") }
    }

    /// A bad upload: the library's one-line message in the page, and the studio keeps serving.
    static func badUpload(_ browser: WebDriver, _ s: Scratch) async throws {
        try await browser.type("[data-testid=upload-input]", s.file("broken.jpg"))
        try await browser.wait(
            "!document.querySelector('[data-testid=error-message]').hidden", what: "the upload's error message")
        let message =
            try await browser.run("return document.querySelector('[data-testid=error-message]').textContent;")
            as? String ?? ""
        #expect(message.hasPrefix("broken.jpg: ") && !message.contains("\n"), "\(message)")
        try await browser.click("[data-testid=tab-burst]")
        try await browser.wait(
            "!document.querySelector('[data-testid=workspace-burst]').hidden", what: "the burst workspace again")
        #expect(try await browser.run("return (await fetch('/api/health')).status;") as? Int == 200)
    }
}
