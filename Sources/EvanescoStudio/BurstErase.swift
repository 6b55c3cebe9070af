import EvanescoCore
import EvanescoStack
import Foundation
import Hummingbird

/// The erase brush: strokes painted over the result are erased from it (`BurstStacker.erase`
/// in EvanescoStack), one stroke at a time, each undoable. The stack's own result is kept, so
/// every stroke erases the union of the strokes from it: undo is erasing one stroke fewer.
extension BurstStudioSession {
    /// Changes the strokes with `change` (given the current ones; run on the burst's lane, so
    /// a stroke and an undo arriving together apply one after the other), erases their union
    /// from the plain result (none: the plain result again) and makes that the shown result.
    ///
    /// - Returns: The shown result and the number of strokes in it.
    func erase(_ change: ([EraseStroke]) throws -> [EraseStroke]) throws -> (result: StackResult, strokes: Int) {
        guard let st = state.value else {
            throw HTTPError(.conflict, message: "the burst has not been stacked yet; press Stack")
        }
        let strokes = try change(st.strokes)
        let plain = st.plain
        var result = plain
        if !strokes.isEmpty {
            let mask = EraseMask(width: plain.image.width, height: plain.image.height, strokes: strokes)
            if let frames {
                result = try BurstStacker.erase(
                    mask, from: plain, frames: frames, interpolation: st.options.interpolation)
            } else {
                // A burst over the memory limit is stacked again from its files, warped as the first time.
                var o = st.options
                o.erase = mask
                o.memoryLimit = memoryLimit
                o.givenHomographies = plain.frames.map(\.homography)
                o.givenFields = plain.localFields
                result = try shown(BurstStacker.stack(contentsOf: files, options: o))
            }
        }
        state.update { s in
            guard s != nil else { return }
            s!.result = result
            s!.strokes = strokes
            s!.pictures.merge(BurstWorkspace.pictures(of: result)) { $1 }
            for key in Array(s!.previews.keys)
            where key.hasPrefix("result") || key.hasPrefix("kept") || key.hasPrefix("provenance") {
                s!.previews[key] = nil
            }
        }
        return (result, strokes.count)
    }
}

extension BurstWorkspace {
    /// What a stroke or an undo answers: how many strokes are erased now and what the pass did.
    struct Erased: Codable {
        var strokes: Int
        var erase: EraseSummary?
        var seconds: Double
    }

    func addEraseRoutes(_ router: Router<BasicRequestContext>) {
        // A stroke: {"points": [[x, y], ...], "radius": r}, in the result's pixels.
        router.post("/api/burst/:id/erase") { request, context -> Response in
            let s = try self.sessions.get(context.parameters.get("id"))
            let stroke = try await decodeBody(request, as: EraseStroke.self)
            try validateSettings(["brush radius": "radius", "stroke": "points"]) { () throws(SettingError) in
                try stroke.validate()
            }
            let start = Date()
            let r = try await libraryCall(self.lane) {
                try s.erase { strokes in
                    guard strokes.count < EraseStroke.maximumStrokes else {
                        throw HTTPError(
                            .conflict,
                            message:
                                "the erase keeps at most \(EraseStroke.maximumStrokes) strokes; undo some, or paint "
                                + "larger strokes"
                        )
                    }
                    return strokes + [stroke]
                }
            }
            return try jsonResponse(
                Erased(strokes: r.strokes, erase: r.result.erase, seconds: Date().timeIntervalSince(start)))
        }
        router.post("/api/burst/:id/erase/undo") { _, context -> Response in
            let s = try self.sessions.get(context.parameters.get("id"))
            let start = Date()
            let r = try await libraryCall(self.lane) {
                try s.erase { strokes in
                    guard !strokes.isEmpty else { throw HTTPError(.conflict, message: "there is no stroke to undo") }
                    return Array(strokes.dropLast())
                }
            }
            return try jsonResponse(
                Erased(strokes: r.strokes, erase: r.result.erase, seconds: Date().timeIntervalSince(start)))
        }
    }
}
