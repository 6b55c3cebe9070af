import CEvanesco
import EvanescoCore
import EvanescoDepth
import EvanescoFaces
import EvanescoIO
import Foundation

/// The mattes `evn_read_depth` returns, in this order when the file has them.
private let matteKinds: [AuxiliaryKind] = [.portrait, .hair, .skin, .teeth, .glasses, .sky]

@_cdecl("evn_read_depth")
public func evn_read_depth(
    _ path: UnsafePointer<CChar>?, _ map: UnsafeMutablePointer<evn_image>?,
    _ mattes: UnsafeMutablePointer<UnsafeMutablePointer<evn_image>?>?, _ matteCount: UnsafeMutablePointer<Int64>?,
    _ info: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ message: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> evn_status {
    CImage.clear(map)
    mattes?.pointee = nil
    matteCount?.pointee = 0
    info?.pointee = nil
    return CCall.run(message) { handover in
        let file = try CText.required(path, "path")
        guard map != nil else { throw ArgumentError("the map image pointer is NULL") }
        guard (mattes == nil) == (matteCount == nil) else {
            throw ArgumentError("mattes and matte_count are given together or not at all")
        }
        var options = DepthReadOptions()
        options.decodePhoto = false
        options.decodeAuxiliary = mattes == nil ? [] : Set(matteKinds)
        let photo = try DepthReader.read(file, options: options)
        guard let depth = photo.depth else {
            throw DepthError.noDepth(path: file, found: photo.auxiliary.map(\.type))
        }
        let found = matteKinds.compactMap { k in photo.auxiliary(k).flatMap { $0.image.width > 0 ? $0 : nil } }
        let summary = try JSONSerialization.jsonObject(with: Data(ReportJSON.line(DepthSummary(photo)).utf8))
        try handover.text(CJSON.text(["summary": summary, "mattes": found.map(\.kind.rawValue)]), to: info)
        try handover.image(.float32(depth.map), to: map)
        if let mattes, let matteCount, !found.isEmpty {
            let array = try handover.images(found.count, to: mattes, length: matteCount)
            for (i, m) in found.enumerated() { try handover.image(m.image, to: array + i) }
        }
    }
}

@_cdecl("evn_portrait")
public func evn_portrait(
    _ path: UnsafePointer<CChar>?, _ photo: UnsafePointer<evn_image>?, _ depth: UnsafePointer<evn_image>?,
    _ depthKind: UnsafePointer<CChar>?, _ settings: UnsafePointer<CChar>?, _ result: UnsafeMutablePointer<evn_image>?,
    _ report: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ message: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> evn_status {
    CImage.clear(result)
    report?.pointee = nil
    return CCall.run(message) { handover in
        guard result != nil else { throw ArgumentError("the result image pointer is NULL") }
        let s = try CText.settings(settings, as: PortraitSettings.self, default: PortraitSettings())
        // The library's work includes dropping what it made on the way (the renderer, the mask),
        // and handing the result over includes dropping the library's copy of it: interface_s
        // then splits the whole call.
        var times = CTimes()
        if path != nil, photo != nil || depth != nil {
            throw ArgumentError("give a path or a photo with its depth, not both")
        }
        var input =
            try path == nil
            ? times.measure(\.copyIn) { (try CImage.read(photo, "photo"), try CImage.read(depth, "depth")) } : nil
        var rendered: (image: AnyImage, report: String)? = try times.measure(\.work) {
            let renderer: PortraitRenderer
            if let path {
                renderer = try PortraitRenderer(contentsOf: String(cString: path))
            } else {
                let (pixels, map) = input!
                input = nil
                renderer = try PortraitRenderer(memoryPhoto(pixels, map, depthKind))
            }
            let r = try renderer.render(s)
            return (r.image, try ReportJSON.line(r.report))
        }
        let text = rendered!.report
        try times.measure(\.copyOut) {
            try handover.image(rendered!.image, to: result)
            rendered = nil
        }
        handover.text(times.added(to: text), to: report)
    }
}

/// A photo and a map in memory as the depth photo a renderer starts from, read as the command
/// line reads a photo with `--depth-map`.
private func memoryPhoto(_ pixels: AnyImage, _ map: AnyImage, _ depthKind: UnsafePointer<CChar>?) throws -> DepthPhoto {
    var kind = DepthReader.separateMapKind
    if let depthKind {
        let name = String(cString: depthKind)
        guard let k = DepthKind(rawValue: name) else {
            throw ArgumentError("depth kind must be depth or disparity, not \(SettingsCoding.quoted(name))")
        }
        kind = k
    }
    return try DepthReader.pair(
        photo: DecodedImage(image: pixels, format: .png), path: "photo", map: map, mapName: "depth", kind: kind)
}

/// A background replacement session and what it needs between frames.
final class CBackdrop {
    let session: BackdropSession
    let fallback: String?
    init(session: BackdropSession, fallback: String?) {
        self.session = session
        self.fallback = fallback
    }
}

@_cdecl("evn_backdrop_new")
public func evn_backdrop_new(
    _ settings: UnsafePointer<CChar>?, _ background: UnsafePointer<evn_image>?, _ cascade: UnsafePointer<CChar>?,
    _ session: UnsafeMutablePointer<OpaquePointer?>?, _ message: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> evn_status {
    session?.pointee = nil
    return CCall.run(message) { _ in
        guard let session else { throw ArgumentError("the session pointer is NULL") }
        let options = try CText.settings(settings, as: BackdropSessionOptions.self, default: BackdropSessionOptions())
        let backdrop = try background.map { b -> Image<UInt8> in
            guard case .uint8(let i) = try CImage.read(b, "background") else {
                throw ArgumentError("background must be uint8 (RGB or RGBA)")
            }
            return i.withChannels(3)
        }
        let (classifier, fallback) = try BackdropSession.cascade(
            for: options.subject, path: cascade.map { String(cString: $0) })
        let s = BackdropSession(options: options, background: backdrop, cascade: classifier)
        session.pointee = OpaquePointer(Unmanaged.passRetained(CBackdrop(session: s, fallback: fallback)).toOpaque())
    }
}

@_cdecl("evn_backdrop_process")
public func evn_backdrop_process(
    _ session: OpaquePointer?, _ color: UnsafePointer<evn_image>?, _ depth: UnsafePointer<evn_image>?,
    _ result: UnsafeMutablePointer<evn_image>?, _ info: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?,
    _ message: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
) -> evn_status {
    CImage.clear(result)
    info?.pointee = nil
    return CCall.run(message) { handover in
        guard let session else { throw ArgumentError("the session is NULL") }
        guard result != nil else { throw ArgumentError("the result image pointer is NULL") }
        let b = Unmanaged<CBackdrop>.fromOpaque(UnsafeRawPointer(session)).takeUnretainedValue()
        let frame = try b.session.process(color: CImage.read(color, "color"), depth: CImage.read(depth, "depth"))
        var details = try JSONSerialization.jsonObject(with: Data(ReportJSON.line(frame.report).utf8))
        if let note = b.fallback, var d = details as? [String: Any] {
            d["note"] = note
            details = d
        }
        try handover.text(CJSON.text(details), to: info)
        try handover.image(.uint8(frame.image), to: result)
    }
}

@_cdecl("evn_backdrop_free")
public func evn_backdrop_free(_ session: OpaquePointer?) {
    guard let session else { return }
    Unmanaged<CBackdrop>.fromOpaque(UnsafeRawPointer(session)).release()
}
