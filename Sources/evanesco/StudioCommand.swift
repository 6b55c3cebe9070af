import ArgumentParser
import EvanescoCore
import EvanescoIO
import EvanescoStudio
import Foundation

struct StudioCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "studio",
        abstract: "Open the studio: the burst, depth and backdrop apps as one local web app.",
        discussion: """
            Serves a page on this machine that lists the images, folders and videos under PATH... \
            (folders of images are bursts) and opens them in three workspaces: Burst (align and \
            merge with live progress, before/after, per-pixel maps, downloads), Depth (the Image \
            Depth Maps tutorial's views and effects with a live focus slider) and Backdrop (replace \
            the background behind a person). Files can also be dropped on the page.

            When ready it prints one line on stdout, `studio: http://HOST:PORT/?token=TOKEN`, and \
            opens it with xdg-open unless --no-open. Every request but the page itself needs the \
            token; Host and Origin are checked and only files under PATH... are served. Ctrl-C \
            stops it and removes its temporary files.

            EXAMPLES:
              evanesco studio ~/Pictures
              evanesco studio burst/ IMG_0001.HEIC --port 8750 --no-open
            """)

    @Argument(help: "Files and folders to show (default: the current folder).") var paths: [String] = []
    @Option(help: .studio("host")) var host = StudioConfiguration.defaultHost
    @Option(help: .studio("port")) var port = Int(StudioConfiguration.Limits.port.defaultValue!)
    @Option(name: [.customLong("max-upload"), .customLong("max-upload-mb")], help: .studio("maxUpload"))
    var maxUpload = ByteSize(bytes: Int(StudioConfiguration.Limits.maxUpload.defaultValue!))
    @Option(help: .studio("memoryLimit")) var memoryLimit = MemoryLimit.standard
    @Flag(help: "Do not open a browser.") var noOpen = false

    func validate() throws {
        let configuration = configuration()
        try validateSettings(StudioConfiguration.flagsByName) { () throws(SettingError) in
            try configuration.validate()
        }
        for p in paths where !FileManager.default.fileExists(atPath: p) {
            throw ValidationError("\(p) does not exist; give files or folders the studio should show")
        }
    }

    func run() async throws {
        try await reportingErrors {
            let studio = try Studio(configuration())
            let open = !noOpen
            // Ctrl-C and SIGTERM stop the studio at once, even with a browser's connections still
            // open: running jobs are cancelled, ffmpeg children stopped, temporary files removed.
            var sources: [DispatchSourceSignal] = []
            for sig in [SIGINT, SIGTERM] {
                signal(sig, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
                source.setEventHandler {
                    studio.shutdown()
                    Cleanup.run()
                    Foundation.exit(0)
                }
                source.resume()
                sources.append(source)
            }
            defer { sources.forEach { $0.cancel() } }
            try await studio.run(handlesSignals: false) { url in
                // If the URL cannot be printed nobody can use the studio: stop.
                do { try StandardOutput.line("studio: \(url)") } catch {
                    Diagnostics.error(commandLineMessage(error))
                    studio.shutdown()
                    Foundation.exit(1)
                }
                if open { Self.openBrowser(url) }
            }
            // ffmpeg children of an export still running, temporary outputs not yet renamed.
            Cleanup.run()
        }
    }

    /// The studio's configuration from the flags.
    func configuration() -> StudioConfiguration {
        var config = StudioConfiguration(paths: paths.isEmpty ? [FileManager.default.currentDirectoryPath] : paths)
        config.host = host
        config.port = port
        config.maxUploadBytes = maxUpload.bytes
        config.burstMemoryLimit = memoryLimit.bytes
        return config
    }

    static func openBrowser(_ url: String) {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        p.arguments = ["xdg-open", url]
        p.standardOutput = FileHandle.nullDevice
        p.standardError = FileHandle.nullDevice
        do { try p.run() } catch {
            Diagnostics.warning("could not start xdg-open (\(error)); open the URL above in a browser")
        }
    }
}
