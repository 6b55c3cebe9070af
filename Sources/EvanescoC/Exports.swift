import CEvanesco
import EvanescoCore
import EvanescoDepth
import EvanescoIO
import EvanescoStack
import Foundation

// The functions of include/evanesco.h (CEvanesco). Each checks its arguments, calls the library
// as the command line does, and reports failure through CCall: nothing here aborts the process.

/// The version string, allocated once for the life of the process.
nonisolated(unsafe) private let versionText = strdup(EvanescoVersion.current)!

@_cdecl("evn_version")
public func evn_version() -> UnsafePointer<CChar> { UnsafePointer(versionText) }

@_cdecl("evn_free")
public func evn_free(_ pointer: UnsafeMutableRawPointer?) { free(pointer) }

@_cdecl("evn_settings")
public func evn_settings(
    _ kind: UnsafePointer<CChar>?, _ json: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ message: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> evn_status {
    json?.pointee = nil
    return CCall.run(message) { handover in
        let name = try CText.required(kind, "kind")
        guard let settings = SettingsCatalog.kinds[name] else {
            throw ArgumentError(
                "no settings kind \(SettingsCoding.quoted(name)); kinds: "
                    + SettingsCatalog.kinds.keys.sorted().joined(separator: ", "))
        }
        try handover.text(SettingsCatalog.json(settings), to: json)
    }
}

@_cdecl("evn_read_image")
public func evn_read_image(
    _ path: UnsafePointer<CChar>?, _ image: UnsafeMutablePointer<evn_image>?,
    _ info: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ message: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> evn_status {
    CImage.clear(image)
    info?.pointee = nil
    return CCall.run(message) { handover in
        let file = try CText.required(path, "path")
        guard image != nil else { throw ArgumentError("the result image pointer is NULL") }
        let decoded = try ImageCodecs.read(file)
        let description: [String: Any] = [
            "format": decoded.format.rawValue, "width": decoded.image.width, "height": decoded.image.height,
            "channels": decoded.image.channels, "bitDepth": decoded.image.bitDepth,
            "storedWidth": decoded.storedWidth, "storedHeight": decoded.storedHeight
        ]
        try handover.text(CJSON.text(description), to: info)
        try handover.image(decoded.image, to: image)
    }
}

@_cdecl("evn_write_image")
public func evn_write_image(
    _ path: UnsafePointer<CChar>?, _ image: UnsafePointer<evn_image>?, _ settings: UnsafePointer<CChar>?,
    _ message: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> evn_status {
    CCall.run(message) { _ in
        let file = try CText.required(path, "path")
        let options = try CText.settings(settings, as: WriteOptions.self, default: WriteOptions())
        let pixels = try CImage.read(image, "image")
        try ImageCodecs.write(pixels, to: file, options: options)
    }
}

/// JSON texts for the caller.
enum CJSON {
    static func text(_ object: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
    }
}
