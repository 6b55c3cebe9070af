import EvanescoCore
import EvanescoIO
import Foundation
import HTTPTestSupport
import SharedTestData
import SubprocessTestSupport
import Testing

/// `evanesco studio` as a user starts it: a process whose one line on stdout is the URL, stopped
/// with Ctrl-C (SIGINT). Its temporary files go into a folder of the test's own (TMPDIR).
final class StudioProcess: @unchecked Sendable {
    let child: Subprocess
    let url: String
    let tmp: String

    init(_ paths: [String], tmp: String, extra: [String] = []) throws {
        self.tmp = tmp
        var env = ProcessInfo.processInfo.environment
        env["TMPDIR"] = tmp
        // Under AddressSanitizer the server is stopped by Ctrl-C in mid-serve, its sessions alive:
        // a leak check at that exit reports them (memory errors still fail it; the studio's
        // objects are leak-checked in-process by EvanescoStudioTests, which create and release them).
        if let asan = env["ASAN_OPTIONS"] { env["ASAN_OPTIONS"] = asan + ":detect_leaks=0" }
        // Its stderr goes to a file, so a sanitizer's report reaches the failure message.
        child = try Subprocess(
            CLI.binary, ["studio"] + paths + ["--no-open", "--port", "0"] + extra, environment: env,
            stderr: .file(tmp + "/../studio-stderr.txt"))
        url = child.firstLine(within: 120) ?? ""
    }

    deinit { if child.isRunning { child.send(SIGKILL) } }

    /// SIGINT, as Ctrl-C sends; returns the exit status (-1 if it did not stop within a minute)
    /// and anything more it printed on stdout.
    func interrupt() -> (status: Int32, rest: String, stderr: String) {
        child.send(SIGINT)
        let r = child.finish(within: 60)
        let rest = r.out.firstIndex(of: 10).map { r.out[($0 + 1)...] } ?? []
        let err = (try? String(contentsOfFile: tmp + "/../studio-stderr.txt", encoding: .utf8)) ?? ""
        return (
            r.status, String(decoding: rest, as: UTF8.self),
            String(err.suffix(4000)) + (r.timedOut ? "\n[it hung]" : "")
        )
    }
}

enum StudioData {
    static let shared = SharedTestData.root
    static var pug: String? {
        let p = shared + "/depth/pug-iphone13pro/pug.heic"
        return FileManager.default.fileExists(atPath: p) ? p : nil
    }
    /// A TrueDepth selfie, for the backdrop screenshot.
    static var face: String? {
        let p = shared + "/depth/truedepth-iphone/heic_face_data.heic"
        return FileManager.default.fileExists(atPath: p) ? p : nil
    }
    /// The pug timing needs an unsanitized release build: a debug build renders ~20x slower, one
    /// built with a sanitizer several times slower. EVANESCO_BIN names the release binary.
    static var release: Bool {
        ProcessInfo.processInfo.environment["EVANESCO_BIN"] != nil
            || (CLI.binary.contains("/release/") && !sanitizedServer)
    }
    /// Whether the server is this test build's own binary and the build is sanitized
    /// (EVANESCO_SANITIZE: the sanitizer's runtime is in this process too). The release binary
    /// named by EVANESCO_BIN is held to every timing whatever this test was built with.
    static var sanitizedServer: Bool {
        guard ProcessInfo.processInfo.environment["EVANESCO_BIN"] == nil else { return false }
        let this = dlopen(nil, RTLD_NOW)
        return dlsym(this, "__asan_init") != nil || dlsym(this, "__tsan_init") != nil
    }

    /// A smooth, non-repeating texture with a dark square that moves from frame to frame.
    static func frame(_ k: Int, width w: Int = 160, height h: Int = 120) -> Image<UInt8> {
        Image<UInt8>(width: w, height: h, channels: 3) { d in
            for y in 0..<h {
                for x in 0..<w {
                    let fx = Double(x), fy = Double(y)
                    let t =
                        45 * sin(fx * 0.19 + fy * 0.06) + 40 * sin(fy * 0.15 - fx * 0.08) + 25
                        * sin((fx + 2 * fy) * 0.087)
                    let square = x >= 8 + 36 * k && x < 36 + 36 * k && y >= 40 && y < 70
                    for c in 0..<3 {
                        d[(y * w + x) * 3 + c] = square ? 5 : UInt8(max(0, min(255, 128 + t * (1 - 0.25 * Double(c)))))
                    }
                }
            }
        }
    }

    /// A latency budget in milliseconds, as the product promises it on a quiet machine, stretched
    /// when the machine is oversubscribed (runnable tasks over the cores, when over 1) by the
    /// square of that ratio: a preview or an erase goes from the browser to the server and back,
    /// each hop waiting for a core, so contention compounds. Beside a CI build and a soak (load 5
    /// on 2 cores) the slider's p95 was 267 ms against 42-48 ms idle (6x) and the erase 1.2 s
    /// against 0.2-0.3 s. The load is the larger of the 1-minute average and, when `during` is
    /// given, the mean run queue sampled while the measurement ran: the 1-minute average lags, and
    /// CI once read 1.6 before a drag that other suites' work crowded to a 111 ms p95. On a quiet
    /// machine the budget is the promise itself (docs/benchmarks.md gives the figures there).
    static func budget(_ ms: Double, during sampled: Double? = nil) -> (ms: Double, load: String) {
        let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
        let average = Double(text.split(separator: " ").first ?? "") ?? 0
        let load = max(average, sampled ?? 0)
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let over = max(1, load / Double(max(1, cores)))
        let budget = ms * over * over
        let how = sampled.map { String(format: "1-min %.1f, run queue %.1f", average, $0) } ?? "1-min"
        return (budget, String(format: "load %.1f (%@) on %d cores: budget %.0f ms", load, how, cores, budget))
    }

    /// Samples the kernel's count of runnable tasks (the fourth field of /proc/loadavg, less the
    /// sampler itself) every 50 ms until `stop()`, which returns the mean, or until it is
    /// released: the load during a measurement, not the minute before it.
    final class RunQueueSampler: @unchecked Sendable {
        private let lock = NSLock()
        private var samples: [Double] = []
        private var running = true

        init() {
            Thread { [weak self] in
                while let self, self.lock.withLock({ self.running }) {
                    let text = (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? ""
                    let fields = text.split(separator: " ")
                    if fields.count > 3, let runnable = Double(fields[3].split(separator: "/").first ?? "") {
                        self.lock.withLock { self.samples.append(max(0, runnable - 1)) }
                    }
                    Thread.sleep(forTimeInterval: 0.05)
                }
            }.start()
        }

        func stop() -> Double? {
            lock.withLock {
                running = false
                return samples.isEmpty ? nil : samples.reduce(0, +) / Double(samples.count)
            }
        }
    }

    /// p-th percentile (0...100) of `values`, nearest rank.
    static func percentile(_ values: [Double], _ p: Double) -> Double {
        let s = values.sorted()
        return s[min(s.count - 1, max(0, Int((p / 100 * Double(s.count)).rounded(.up)) - 1))]
    }
}
