/// How macOS names a container's folder under `Mobile Documents`: its identifier with dots
/// as tildes (`iCloud.md.obsidian` is `iCloud~md~obsidian`). A tilde is never part of a
/// container's name (`ContainerStore.isValidName`), so the two map one to one.
public enum ContainerFolder {
    public static func name(of container: String) -> String {
        container.replacingOccurrences(of: ".", with: "~")
    }

    /// The container a folder name stands for; nil if it is not one: a dot in it (the
    /// folder of `a.b` is `a~b`), an empty part, or a name no container may have.
    public static func container(named folder: String) -> String? {
        guard !folder.contains("."), !folder.hasPrefix("~"), !folder.hasSuffix("~"), !folder.contains("~~") else {
            return nil
        }
        let container = folder.replacingOccurrences(of: "~", with: ".")
        return ContainerStore.isValidName(container) ? container : nil
    }
}
