import CEvanesco
import EvanescoCore
import EvanescoDepth
import EvanescoFaces
import EvanescoIO
import EvanescoStack
import Foundation

/// A problem with what a C caller passed (a NULL pointer, an image of the wrong shape): the C
/// interface's own refusals, before the library sees the call.
struct ArgumentError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Error handling of every exported function: runs the body, and turns what it throws into a
/// status and a one-line message in memory the caller frees with `evn_free`.
enum CCall {
    /// Runs `body`, which hands its outputs over through the ``Handover`` it is given; on
    /// failure takes back whatever it had handed over and writes the message to `message` (when
    /// not NULL), so a failed call leaves nothing to free but its message.
    static func run(
        _ message: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?, _ body: (Handover) throws -> Void
    ) -> evn_status {
        message?.pointee = nil
        let handover = Handover()
        do {
            try body(handover)
            return EVN_OK
        } catch {
            handover.takeBack()
            message?.pointee = CText.copy(Self.message(error))
            return status(of: error)
        }
    }

    /// The kind of failure, as the header lists them.
    static func status(of error: any Error) -> evn_status {
        switch error {
        case is ArgumentError: EVN_ERROR_ARGUMENT
        case is SettingError, is DecodingError: EVN_ERROR_SETTING
        case PortraitError.invalidSetting: EVN_ERROR_SETTING
        case StackError.cancelled: EVN_ERROR_CANCELLED
        case is ImageIOError, is CascadeError, is VideoError, is FrameStreamError: EVN_ERROR_FILE
        case is StackError, is DepthError, is PortraitError, is FocusError, is BackdropError,
            is BackdropSessionError, is RawFinishError:
            EVN_ERROR_INPUT
        default: EVN_ERROR_OTHER
        }
    }

    /// The library's message, on one line; a settings error names the JSON key.
    static func message(_ error: any Error) -> String {
        let text = error is DecodingError ? SettingsCoding.message(error) : String(describing: error)
        return text.split(whereSeparator: \.isNewline).joined(separator: " ")
    }
}

/// Text handed to and from C.
enum CText {
    /// A copy in memory from `malloc`, which `evn_free` releases.
    static func copy(_ text: String) -> UnsafeMutablePointer<CChar>? { strdup(text) }

    /// A C string argument, which must not be NULL.
    static func required(_ text: UnsafePointer<CChar>?, _ name: String) throws -> String {
        guard let text else { throw ArgumentError("\(name) is NULL") }
        return String(cString: text)
    }

    /// A settings argument decoded as `T` (NULL or empty: the defaults). Its keys and values are
    /// checked by `T`'s own decoding, which names an unknown key and a value out of range.
    static func settings<T: Decodable>(_ text: UnsafePointer<CChar>?, as type: T.Type, default value: T) throws -> T {
        guard let text, text.pointee != 0 else { return value }
        return try JSONDecoder().decode(T.self, from: Data(String(cString: text).utf8))
    }
}

/// What one call has handed to its caller so far (texts, images, an array of images), each with
/// how to take it back: if the call then fails, ``CCall/run(_:_:)`` takes them all back, so the
/// caller is left with nothing to free but the message.
final class Handover {
    private var undo: [() -> Void] = []

    /// Writes `text` to `out` when the caller asked for it.
    func text(_ text: @autoclosure () throws -> String, to out: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?)
        rethrows
    {
        guard let out else { return }
        out.pointee = CText.copy(try text())
        undo.append {
            free(out.pointee)
            out.pointee = nil
        }
    }

    /// Hands `image` over into `out` (see `CImage.give(_:to:)`).
    func image(_ image: AnyImage, to out: UnsafeMutablePointer<evn_image>?) throws {
        try CImage.give(image, to: out)
        undo.append {
            free(out!.pointee.data)
            out!.pointee = evn_image()
        }
    }

    /// Hands over an array of `count` images from `malloc` (each then filled by ``image(_:to:)``),
    /// its address in `out` and its length in `length`.
    func images(
        _ count: Int, to out: UnsafeMutablePointer<UnsafeMutablePointer<evn_image>?>,
        length: UnsafeMutablePointer<Int64>
    )
        throws -> UnsafeMutablePointer<evn_image>
    {
        let bytes = MemoryLayout<evn_image>.stride * count
        guard let block = calloc(count, MemoryLayout<evn_image>.stride) else { throw OutOfMemory(bytes: bytes) }
        let array = block.bindMemory(to: evn_image.self, capacity: count)
        out.pointee = array
        length.pointee = Int64(count)
        undo.append {
            free(block)
            out.pointee = nil
            length.pointee = 0
        }
        return array
    }

    /// Takes back everything handed over, the latest first.
    func takeBack() {
        for u in undo.reversed() { u() }
        undo = []
    }
}

/// Where the time of one call went on this side of the interface: reading the caller's images,
/// the library's work, and handing the result back. Reports carry it as `interface_s`, so a
/// caller can tell the interface's cost from the work's.
struct CTimes {
    var copyIn = 0.0
    var work = 0.0
    var copyOut = 0.0

    /// Runs `body`, adding its seconds to the part `part` names.
    mutating func measure<T>(_ part: WritableKeyPath<CTimes, Double>, _ body: () throws -> T) rethrows -> T {
        let start = DispatchTime.now().uptimeNanoseconds
        defer { self[keyPath: part] += Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9 }
        return try body()
    }

    /// `report` (a JSON object, as the library writes them) with these times added as
    /// `interface_s`, spliced in before its closing brace: a stack's report with every frame's
    /// alignment is not parsed again. Never fails, so it can run after the result was handed over.
    func added(to report: String) -> String {
        guard let end = report.lastIndex(of: "}") else { return report }
        let times = String(
            format: "\"interface_s\":{\"copy_in\":%.6f,\"work\":%.6f,\"copy_out\":%.6f}", copyIn, work, copyOut)
        let empty = report[..<end].trimmingCharacters(in: .whitespacesAndNewlines).hasSuffix("{")
        return report[..<end] + (empty ? "" : ",") + times + report[end...]
    }
}
