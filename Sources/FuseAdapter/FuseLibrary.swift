import CFuse3

/// Facts about the libfuse3 this binary runs with.
public enum FuseLibrary {
    /// The libfuse package version, e.g. "3.14.0".
    public static var version: String {
        String(cString: fuse_pkgversion())
    }
}
