import Foundation
import Testing
@testable import EvanescoCore

/// A 3x2 single-channel image: row 0 = 1 2 3, row 1 = 4 5 6.
let small = Image<UInt8>(width: 3, height: 2, channels: 1, samples: [1, 2, 3, 4, 5, 6])

func rows<S>(_ img: Image<S>) -> [[S]] {
    (0..<img.height).map { y in (0..<(img.width * img.channels)).map { img.samples[y * img.rowLength + $0] } }
}

@Suite struct ImageBasics {
    /// `Image(width:height:channels:) { ... }` starts from zero: what the closure does not write
    /// is zero whatever the memory held before (it once handed over uninitialised memory, and a
    /// test's erase mask drawn that way took stray samples from the heap: issue 45 item 21).
    @Test func drawingIntoPartOfAnImageLeavesTheRestZero() {
        for round in 0..<50 {
            // Leave freed blocks of garbage the size of the next image on the heap.
            var garbage: [ContiguousArray<UInt8>] = []
            for _ in 0..<8 { garbage.append(ContiguousArray(repeating: 0xAB, count: 96 * 80)) }
            garbage.removeAll()
            let mask = Image<UInt8>(width: 96, height: 80, channels: 1) { d in
                for y in 16..<37 { for x in 16..<36 { d[y * 96 + x] = 255 } }
            }
            let stray = mask.samples.enumerated().filter { i, v in
                let x = i % 96, y = i / 96
                return v != ((16..<37).contains(y) && (16..<36).contains(x) ? 255 : 0)
            }.count
            #expect(stray == 0, "round \(round): \(stray) samples the closure did not write are not 0")
            if stray > 0 { break }
        }
        // The explicit uninitialised form still gives what its closure writes.
        let full = Image<UInt16>(uninitializedWidth: 4, height: 2, channels: 2) { d in
            for i in 0..<d.count { d[i] = UInt16(i * 3) }
        }
        #expect(full.samples == ContiguousArray((0..<16).map { UInt16($0 * 3) }))
    }

    @Test func copyOnWriteKeepsValueSemantics() {
        var a = small
        let b = a
        a[0, 0, 0] = 99
        #expect(b[0, 0, 0] == 1)
        #expect(a[0, 0, 0] == 99)
    }

    @Test func sampleConversionsKnownAnswers() {
        let img = Image<UInt8>(width: 4, height: 1, channels: 1, samples: [0, 1, 128, 255])
        #expect(img.converted(to: UInt16.self).samples == [0, 257, 32896, 65535])
        #expect(img.converted(to: UInt16.self).converted(to: UInt8.self) == img)
        let f = img.converted(to: Float.self)
        #expect(f.samples[2] == Float(128) / 255)
        let u16 = Image<UInt16>(width: 4, height: 1, channels: 1, samples: [0, 128, 129, 65535])
        #expect(u16.converted(to: UInt8.self).samples == [0, 0, 1, 255])  // round(v / 257)
        let fl = Image<Float>(width: 4, height: 1, channels: 1, samples: [-0.5, 0.5, 1.5, .nan])
        #expect(fl.converted(to: UInt8.self).samples == [0, 128, 255, 0])  // clamped, NaN -> 0
    }

    @Test func everyUInt8SurvivesFloatRoundTrip() {
        let all = Image<UInt8>(
            width: 256, height: 1, channels: 1, samples: ContiguousArray((0...255).map { UInt8($0) }))
        #expect(all.converted(to: Float.self).converted(to: UInt8.self) == all)
        #expect(all.converted(to: UInt16.self).converted(to: Float.self).converted(to: UInt8.self) == all)
    }

    @Test func channelConversions() {
        let rgb = Image<UInt8>(width: 2, height: 1, channels: 3, samples: [255, 0, 0, 10, 20, 30])
        #expect(rgb.withChannels(1).samples == [76, 18])  // 0.299*255, 0.299*10+0.587*20+0.114*30
        #expect(rgb.withChannels(4).samples == [255, 0, 0, 255, 10, 20, 30, 255])
        #expect(rgb.withChannels(4).withChannels(3) == rgb)
        #expect(small.withChannels(3).samples.prefix(6) == [1, 1, 1, 2, 2, 2])
    }

    @Test func crop() {
        #expect(small.cropped(x: 1, y: 0, width: 2, height: 2).samples == [2, 3, 5, 6])
        #expect(small.cropped(x: 2, y: 1, width: 5, height: 5).samples == [6])
    }

    @Test func stripExecutorVisitsEveryRowOnce() {
        var hits = [Int](repeating: 0, count: 1000)
        hits.withUnsafeMutableBufferPointer { h in
            let box = UncheckedSendable(h)
            StripExecutor.forEachStrip(rows: 1000, minimumRows: 7) { r in for y in r { box.value[y] += 1 } }
        }
        #expect(hits.allSatisfy { $0 == 1 })
    }

    /// A body run as one of several items (`asItem`, as each of `forEachIndex`'s items are when
    /// two or more run at once) runs the strips its loops ask for on its own thread, in order:
    /// the other cores are busy with the other items. Strips slow enough that, without the flag,
    /// the pool's threads take some of them.
    @Test func stripsOfAnItemStayOnItsThread() {
        let done = DispatchSemaphore(value: 0)
        let same = LockedBox(Set<Bool>()), rows = LockedBox(0)
        let thread = Thread {
            StripExecutor.asItem {
                let mine = pthread_self()
                StripExecutor.forEachStrip(rows: 64, minimumRows: 8) { r in
                    usleep(2000)
                    same.update { _ = $0.insert(pthread_equal(pthread_self(), mine) != 0) }
                    rows.update { $0 += r.count }
                }
            }
            done.signal()
        }
        thread.start()
        done.wait()
        #expect(same.value == [true] && rows.value == 64, "\(same.value), \(rows.value) rows")
    }

    /// In a `forEachIndex` run, an item's strips stay on its thread while another item runs,
    /// and spread over the cores again once it is left running alone (the items ran out).
    @Test func stripsOfALoneItemSpread() {
        guard StripExecutor.threadCount > 1 else { return }
        @Sendable func strips() -> Set<UInt> {
            let threads = LockedBox(Set<UInt>())
            StripExecutor.forEachStrip(rows: 64, minimumRows: 8) { _ in
                usleep(10_000)
                threads.update { _ = $0.insert(UInt(pthread_self())) }
            }
            return threads.value
        }
        // Item 1 runs its strips while item 0 waits for it: they stay on one thread. (Under load
        // the pool may run both items on one thread, one after the other: then try again.)
        let busy = LockedBox(0), concurrent = LockedBox(false)
        for _ in 0..<5 where !concurrent.value {
            let started = DispatchSemaphore(value: 0), finished = DispatchSemaphore(value: 0),
                running = LockedBox(false)
            StripExecutor.forEachIndex(in: 0..<2, workers: 2) { i in
                if i == 0 {
                    running.update { $0 = true }
                    started.signal()
                    _ = finished.wait(timeout: .now() + 1)
                    running.update { $0 = false }
                } else {
                    _ = started.wait(timeout: .now() + 1)
                    if running.value {
                        busy.update { $0 = strips().count }
                        concurrent.update { $0 = true }
                    }
                    finished.signal()
                }
            }
        }
        #expect(concurrent.value && busy.value == 1, "strips ran on \(busy.value) threads while another item ran")
        // Item 0 returns at once and no item is left for its thread: item 1's strips spread.
        let alone = LockedBox(0)
        StripExecutor.forEachIndex(in: 0..<2, workers: 2) { i in
            if i == 1 {
                usleep(50_000)
                alone.update { $0 = strips().count }
            }
        }
        #expect(alone.value > 1, "the lone item's strips ran on \(alone.value) thread(s)")
    }

    @Test func srgbKnownValues() {
        #expect(abs(SRGB.toLinear(0.5) - 0.214041) < 1e-5)
        #expect(abs(SRGB.fromLinear(0.214041) - 0.5) < 1e-5)
        #expect(SRGB.toLinear(0) == 0 && abs(SRGB.toLinear(1) - 1) < 1e-6)
        let img = Image<UInt8>(
            width: 256, height: 1, channels: 1, samples: ContiguousArray((0...255).map { UInt8($0) }))
        #expect(img.linearized().sRGBEncoded(as: UInt8.self) == img)
    }
}

@Suite struct OrientationKnownAnswers {
    // Each expectation is the EXIF definition of the tag written out by hand for the 3x2 image.
    static let cases: [(Orientation, [[UInt8]])] = [
        (.up, [[1, 2, 3], [4, 5, 6]]),
        (.upMirrored, [[3, 2, 1], [6, 5, 4]]),
        (.down, [[6, 5, 4], [3, 2, 1]]),
        (.downMirrored, [[4, 5, 6], [1, 2, 3]]),
        (.leftMirrored, [[1, 4], [2, 5], [3, 6]]),
        (.right, [[4, 1], [5, 2], [6, 3]]),
        (.rightMirrored, [[6, 3], [5, 2], [4, 1]]),
        (.left, [[3, 6], [2, 5], [1, 4]])
    ]

    @Test(arguments: cases.map { $0.0.rawValue })
    func orientation(_ raw: Int) {
        let (o, expected) = Self.cases.first { $0.0.rawValue == raw }!
        let out = small.oriented(o)
        #expect(rows(out) == expected, "orientation \(raw)")
        #expect(out.width == expected[0].count && out.height == expected.count)
    }

    @Test func multiChannelOrientationMovesWholePixels() {
        let rgb = small.withChannels(3)
        #expect(rgb.oriented(.right).withChannels(1) == small.oriented(.right))
    }
}
