import CEvanesco
import EvanescoCore
import EvanescoIO
import EvanescoStack
import Foundation

/// The progress callback and the context pointer it gets back, as one value the stack's worker
/// threads share (the caller's context is its own to make thread-safe).
struct CProgress: @unchecked Sendable {
    let callback: evn_progress_fn
    let context: UnsafeMutableRawPointer?
    let cancellation: StackCancellation

    /// Tells the caller; a nonzero answer cancels the stack.
    func report(_ p: StackProgress) {
        let stop = p.stage.rawValue.withCString { callback(context, $0, Int64(p.done), Int64(p.total)) }
        if stop != 0 { cancellation.cancel() }
    }
}

@_cdecl("evn_stack")
public func evn_stack(
    _ frames: UnsafePointer<evn_image>?, _ frameCount: Int64, _ paths: UnsafePointer<UnsafePointer<CChar>?>?,
    _ pathCount: Int64, _ settings: UnsafePointer<CChar>?, _ progress: evn_progress_fn?,
    _ context: UnsafeMutableRawPointer?, _ result: UnsafeMutablePointer<evn_image>?,
    _ report: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ message: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> evn_status {
    CImage.clear(result)
    report?.pointee = nil
    return CCall.run(message) { handover in
        guard result != nil else { throw ArgumentError("the result image pointer is NULL") }
        var options = try CText.settings(settings, as: StackOptions.self, default: StackOptions())
        let cancellation = StackCancellation()
        options.cancellation = cancellation
        if let progress {
            let p = CProgress(callback: progress, context: context, cancellation: cancellation)
            options.progress = { p.report($0) }
        }
        // As for a portrait: the work includes dropping the frames and what the stack made on
        // the way, handing the result over includes dropping the library's copy.
        var times = CTimes()
        var burst: ([BurstFrame], [String])? = try input(frames, frameCount, paths, pathCount, &times)
        var stacked: (image: AnyImage, report: String)? = try times.measure(\.work) {
            let (frames, names) = burst!
            burst = nil
            let r =
                try frames.isEmpty
                ? BurstStacker.stack(contentsOf: names, options: options) : BurstStacker.stack(frames, options: options)
            if cancellation.isCancelled { throw StackError.cancelled }
            // A raw burst's merged mosaic comes back finished (upright 16-bit RGB, the default
            // finish), as `evanesco stack *.dng -o x.tif` writes it; any other burst as merged.
            let (picture, _) = try r.picture()
            return (picture, try ReportJSON.line(StackReport(r, inputs: names, output: nil)))
        }
        let text = stacked!.report
        try times.measure(\.copyOut) {
            try handover.image(stacked!.image, to: result)
            stacked = nil
        }
        handover.text(times.added(to: text), to: report)
    }
}

/// The burst: frames read from the caller's memory with their names, or no frames and the paths.
private func input(
    _ frames: UnsafePointer<evn_image>?, _ frameCount: Int64, _ paths: UnsafePointer<UnsafePointer<CChar>?>?,
    _ pathCount: Int64, _ times: inout CTimes
) throws -> ([BurstFrame], [String]) {
    guard frameCount >= 0, pathCount >= 0 else { throw ArgumentError("a count is negative") }
    guard (frameCount > 0) != (pathCount > 0) else {
        throw ArgumentError(
            "give frames in memory or paths of files, one of them, not \(frameCount > 0 ? "both" : "neither")")
    }
    if pathCount > 0 {
        guard let paths else { throw ArgumentError("paths is NULL") }
        return ([], try (0..<Int(pathCount)).map { try CText.required(paths[$0], "paths[\($0)]") })
    }
    guard let frames else { throw ArgumentError("frames is NULL") }
    let burst = try times.measure(\.copyIn) {
        try (0..<Int(frameCount)).map { i in
            BurstFrame(name: "frame \(i)", image: try CImage.read(frames + i, "frames[\(i)]"))
        }
    }
    return (burst, burst.map(\.name))
}
