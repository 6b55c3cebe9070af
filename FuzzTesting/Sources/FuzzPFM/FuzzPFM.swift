import EvanescoFuzzEntries

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzTestOneInput(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    if let start { FuzzEntries.targets["FuzzPFM"]!(start, count) }
    return 0
}
