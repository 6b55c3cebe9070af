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
    return CCall.run(message) {
        guard result != nil else { throw ArgumentError("the result image pointer is NULL") }
        var options = try CText.settings(settings, as: StackOptions.self, default: StackOptions())
        let cancellation = StackCancellation()
        options.cancellation = cancellation
        if let progress {
            let p = CProgress(callback: progress, context: context, cancellation: cancellation)
            options.progress = { p.report($0) }
        }
        var times = CTimes()
        let (stacked, inputs) = try stack(frames, frameCount, paths, pathCount, options, &times)
        if cancellation.isCancelled { throw StackError.cancelled }
        // Everything that can fail is done before anything is handed over: a failed call leaves
        // nothing to free but its message.
        let text = try ReportJSON.string(StackReport(stacked, inputs: inputs, output: nil))
        try times.measure(\.copyOut) { try CImage.give(stacked.image, to: result) }
        CText.give(times.added(to: text), to: report)
    }
}

/// The stack of frames in memory or of files, with the inputs as the report names them.
private func stack(
    _ frames: UnsafePointer<evn_image>?, _ frameCount: Int64, _ paths: UnsafePointer<UnsafePointer<CChar>?>?,
    _ pathCount: Int64, _ options: StackOptions, _ times: inout CTimes
) throws -> (StackResult, [String]) {
    guard frameCount >= 0, pathCount >= 0 else { throw ArgumentError("a count is negative") }
    guard (frameCount > 0) != (pathCount > 0) else {
        throw ArgumentError(
            "give frames in memory or paths of files, one of them, not \(frameCount > 0 ? "both" : "neither")")
    }
    if pathCount > 0 {
        guard let paths else { throw ArgumentError("paths is NULL") }
        let files = try (0..<Int(pathCount)).map { try CText.required(paths[$0], "paths[\($0)]") }
        return (try times.measure(\.work) { try BurstStacker.stack(contentsOf: files, options: options) }, files)
    }
    guard let frames else { throw ArgumentError("frames is NULL") }
    let burst = try times.measure(\.copyIn) {
        try (0..<Int(frameCount)).map { i in
            BurstFrame(name: "frame \(i)", image: try CImage.read(frames + i, "frames[\(i)]"))
        }
    }
    return (try times.measure(\.work) { try BurstStacker.stack(burst, options: options) }, burst.map(\.name))
}
