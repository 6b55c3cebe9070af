import EvanescoFuzzEntries

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    if let start { FuzzEntries.targets["FuzzDNG"]!(start, count) }
    return 0
}
