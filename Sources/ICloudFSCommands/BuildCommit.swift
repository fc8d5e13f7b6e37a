/// The commit a build is of: Scripts/package writes its commit here for the build and puts
/// this file back after (a Swift source, so that the build always compiles the new value in;
/// a C header's value could stay cached in a stale module).
enum BuildCommit {
    static let value = "unknown"
}
