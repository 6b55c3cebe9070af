/// The version of Evanesco: the command line's `--version`, the C interface's `evn_version` and
/// the Python package's `__version__`, declared once.
public enum EvanescoVersion {
    /// "0.1.0".
    public static let current = "0.1.0"
}
