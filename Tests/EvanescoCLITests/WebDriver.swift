import Dispatch
import Foundation
import HTTPTestSupport
import Testing

/// A W3C WebDriver client for Debian's `chromium` and `chromium-driver`: starts chromedriver on a
/// free port, opens a headless session, and speaks the protocol's JSON over HTTP.
final class WebDriver: @unchecked Sendable {
    static let chromium = ["/usr/bin/chromium", "/usr/lib/chromium/chromium"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static let driver = ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }
    static var available: Bool { chromium != nil && driver != nil }
    static let absent = Comment(
        rawValue: "SKIPPED: chromium and chromium-driver are not installed (scripts/install-deps.sh installs them); "
            + "the studio's browser tests did not run")

    struct Failure: Error, CustomStringConvertible { var description: String }

    let process: Process
    let port: Int
    var session = ""

    init(width: Int = 1440, height: Int = 960) async throws {
        port = try Self.freePort()
        process = Process()
        process.executableURL = URL(fileURLWithPath: Self.driver!)
        process.arguments =
            ["--port=\(port)"]
            + (ProcessInfo.processInfo.environment["EVANESCO_WEBDRIVER_LOG"].map { ["--verbose", "--log-path=\($0)"] }
                ?? [])
        // Its own output goes to a file that a failure to start quotes.
        let log = NSTemporaryDirectory() + "chromedriver-\(port).log"
        _ = FileManager.default.createFile(atPath: log, contents: nil)
        let logHandle = FileHandle(forWritingAtPath: log)
        process.standardOutput = logHandle ?? FileHandle.nullDevice
        process.standardError = logHandle ?? FileHandle.nullDevice
        try process.run()
        // Ready when /status says so. The wait runs on a thread of its own: under a full parallel
        // suite the cooperative threads can all be busy with other tests for minutes, and a
        // deadline checked from a starved task would expire without chromedriver being slow.
        let port = port, process = process
        let ready: Bool = await withCheckedContinuation { c in
            Thread {
                let deadline = Date().addingTimeInterval(60)
                while process.isRunning && Date() < deadline {
                    if let d = try? HTTP1.blocking("GET", port: port, path: "/status", timeout: 5),
                        let o = (try? JSONSerialization.jsonObject(with: Data(d.body))) as? [String: Any],
                        ((o["value"] as? [String: Any])?["ready"] as? Bool) == true
                    {
                        c.resume(returning: true)
                        return
                    }
                    Thread.sleep(forTimeInterval: 0.1)
                }
                c.resume(returning: false)
            }.start()
        }
        guard ready else {
            let running = process.isRunning
            // SIGKILL: chromedriver may ignore SIGTERM (see quit()).
            if running { kill(process.processIdentifier, SIGKILL) }
            process.waitUntilExit()
            let said = (try? String(contentsOfFile: log, encoding: .utf8)).map { String($0.suffix(2000)) } ?? ""
            throw Failure(
                description: """
                    chromedriver did not start on port \(port) \
                    (\(running ? "no ready /status in 60 s" : "it exited with status \(process.terminationStatus)")): \
                    \(said)
                    """
            )
        }
        let caps: [String: Any] = [
            "capabilities": [
                "alwaysMatch": [
                    "browserName": "chrome",
                    "goog:chromeOptions": [
                        "binary": Self.chromium!,
                        "args": [
                            "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                            "--window-size=\(width),\(height)", "--hide-scrollbars"
                        ]
                    ]
                ]
            ]
        ]
        let r = try await call("POST", "/session", caps)
        guard let id = r["sessionId"] as? String else { throw Failure(description: "no WebDriver session: \(r)") }
        session = id
    }

    func quit() async {
        _ = try? await call("DELETE", "/session/\(session)")
        // chromedriver may ignore SIGTERM: give it a second, then SIGKILL.
        process.terminate()
        for _ in 0..<20 where process.isRunning { try? await Task.sleep(for: .milliseconds(50)) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = 0
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) } }
        _ = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
        }
        return Int(UInt16(bigEndian: addr.sin_port))
    }

    /// One protocol call; returns the response's `value` (or the whole object for /status-like replies).
    @discardableResult
    func call(_ method: String, _ path: String, _ body: [String: Any]? = nil) async throws -> [String: Any] {
        let data = Data(
            try await HTTP1.request(
                method, port: port, path: path, headers: body == nil ? [] : [("Content-Type", "application/json")],
                body: try body.map { [UInt8](try JSONSerialization.data(withJSONObject: $0)) }
            ).body)
        let obj = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        if let v = obj["value"] as? [String: Any], let e = v["error"] as? String {
            throw Failure(description: "WebDriver \(method) \(path): \(e): \(v["message"] as? String ?? "")")
        }
        if let v = obj["value"] as? [String: Any] { return v }
        return obj
    }

    func value(_ method: String, _ path: String, _ body: [String: Any]? = nil) async throws -> Any? {
        let data = Data(
            try await HTTP1.request(
                method, port: port, path: "/session/\(session)" + path, headers: [("Content-Type", "application/json")],
                body: [UInt8](try JSONSerialization.data(withJSONObject: body ?? [:]))
            ).body)
        let obj = (try? JSONSerialization.jsonObject(with: data)) as? [String: Any] ?? [:]
        if let v = obj["value"] as? [String: Any], let e = v["error"] as? String {
            throw Failure(description: "WebDriver \(method) \(path): \(e): \(v["message"] as? String ?? "")")
        }
        return obj["value"]
    }

    func open(_ url: String) async throws { _ = try await value("POST", "/url", ["url": url]) }

    /// Runs `script` in the page (a function body; `arguments` are `args`) and returns its result.
    @discardableResult
    func run(_ script: String, _ args: [Any] = []) async throws -> Any? {
        try await value(
            "POST", "/execute/async",
            [
                "script": """
                const done = arguments[arguments.length - 1];
                Promise.resolve((async (...a) => { \(script) })(...Array.from(arguments).slice(0, -1))).then(done, \
                (e) => done({ __error: String(e) }));
                """, "args": args
            ])
    }

    /// The element id of the first match of `css`.
    func find(_ css: String) async throws -> String {
        let v = try await value("POST", "/element", ["using": "css selector", "value": css]) as? [String: Any] ?? [:]
        guard let id = v.values.first as? String else { throw Failure(description: "no element \(css)") }
        return id
    }

    func click(_ css: String) async throws {
        _ = try await value("POST", "/element/\(try await find(css))/click")
    }

    /// Types into an element; for `<input type=file>`, the text is a file path and the file is chosen.
    func type(_ css: String, _ text: String) async throws {
        _ = try await value("POST", "/element/\(try await find(css))/value", ["text": text])
    }

    /// Waits until `condition` (a JavaScript expression) is true in the page.
    /// It gives up after `seconds` and at least 5 polls a second's worth of asking: inside a
    /// parallel suite this task can be starved for minutes, which is not the page being slow.
    func wait(_ condition: String, seconds: Double = 30, what: String) async throws {
        let deadline = Date().addingTimeInterval(seconds)
        var polls = 0
        while Date() < deadline || Double(polls) < seconds * 5 {
            if (try await run("return !!(\(condition));")) as? Bool == true { return }
            polls += 1
            try await Task.sleep(for: .milliseconds(50))
        }
        throw Failure(description: "timed out after \(seconds) s waiting for \(what) (\(condition))")
    }

    /// Real pointer input: press on the element at a fraction of its width, move through
    /// `steps` positions to another fraction over `milliseconds`, release.
    func drag(_ css: String, from a: Double, to b: Double, steps: Int, milliseconds: Int, y: Double = 0.5) async throws
    {
        let id = try await find(css)
        let rect = try await value("GET", "/element/\(id)/rect") as? [String: Any] ?? [:]
        let w = rect["width"] as? Double ?? 100, h = rect["height"] as? Double ?? 10
        func offset(_ f: Double) -> Int { Int((f - 0.5) * (w - 16)) }
        var actions: [[String: Any]] = [
            [
                "type": "pointerMove", "duration": 0, "origin": ["element-6066-11e4-a52e-4f735466cecf": id],
                "x": offset(a), "y": Int((y - 0.5) * h)
            ],
            ["type": "pointerDown", "button": 0]
        ]
        for k in 1...steps {
            let f = a + (b - a) * Double(k) / Double(steps)
            actions.append([
                "type": "pointerMove", "duration": milliseconds / steps,
                "origin": ["element-6066-11e4-a52e-4f735466cecf": id], "x": offset(f), "y": Int((y - 0.5) * h)
            ])
        }
        actions.append(["type": "pointerUp", "button": 0])
        _ = try await value(
            "POST", "/actions",
            [
                "actions": [
                    ["type": "pointer", "id": "mouse", "parameters": ["pointerType": "mouse"], "actions": actions]
                ]
            ])
        _ = try await value("DELETE", "/actions")
    }

    /// A stroke with the mouse over an element: press at the first point, move through the
    /// others (fractions of its width and height) over `milliseconds`, release.
    func stroke(_ css: String, through points: [(Double, Double)], milliseconds: Int) async throws {
        let id = try await find(css)
        let rect = try await value("GET", "/element/\(id)/rect") as? [String: Any] ?? [:]
        let w = rect["width"] as? Double ?? 100, h = rect["height"] as? Double ?? 100
        let origin = ["element-6066-11e4-a52e-4f735466cecf": id]
        func move(_ p: (Double, Double), _ ms: Int) -> [String: Any] {
            [
                "type": "pointerMove", "duration": ms, "origin": origin, "x": Int((p.0 - 0.5) * w),
                "y": Int((p.1 - 0.5) * h)
            ]
        }
        var actions: [[String: Any]] = [move(points[0], 0), ["type": "pointerDown", "button": 0]]
        for p in points.dropFirst() { actions.append(move(p, milliseconds / max(1, points.count - 1))) }
        actions.append(["type": "pointerUp", "button": 0])
        _ = try await value(
            "POST", "/actions",
            [
                "actions": [
                    ["type": "pointer", "id": "mouse", "parameters": ["pointerType": "mouse"], "actions": actions]
                ]
            ])
        _ = try await value("DELETE", "/actions")
    }

    /// Clicks at a fraction of an element's size.
    func click(_ css: String, at x: Double, _ y: Double) async throws {
        let id = try await find(css)
        let rect = try await value("GET", "/element/\(id)/rect") as? [String: Any] ?? [:]
        let w = rect["width"] as? Double ?? 100, h = rect["height"] as? Double ?? 100
        let origin = ["element-6066-11e4-a52e-4f735466cecf": id]
        _ = try await value(
            "POST", "/actions",
            [
                "actions": [
                    [
                        "type": "pointer", "id": "mouse", "parameters": ["pointerType": "mouse"],
                        "actions": [
                            [
                                "type": "pointerMove", "duration": 0, "origin": origin, "x": Int((x - 0.5) * w),
                                "y": Int((y - 0.5) * h)
                            ],
                            ["type": "pointerDown", "button": 0], ["type": "pointerUp", "button": 0]
                        ]
                    ]
                ]
            ])
        _ = try await value("DELETE", "/actions")
    }

    /// A PNG of the window.
    func screenshot(to path: String) async throws {
        guard let b64 = try await value("GET", "/screenshot") as? String, let data = Data(base64Encoded: b64) else {
            throw Failure(description: "no screenshot")
        }
        try data.write(to: URL(fileURLWithPath: path))
    }
}
