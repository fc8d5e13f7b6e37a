import ContainerFormat
import Testing

struct ContainerFolderTests {
    @Test("a container's folder is its name with dots as tildes, and back")
    func roundTrip() {
        #expect(ContainerFolder.name(of: "iCloud.md.obsidian") == "iCloud~md~obsidian")
        #expect(ContainerFolder.name(of: "com.apple.CloudDocs") == "com~apple~CloudDocs")
        for name in ["iCloud.md.obsidian", "iCloud.com.example-app.notes_2", "single"] {
            #expect(ContainerFolder.container(named: ContainerFolder.name(of: name)) == name)
        }
    }

    @Test("folder names that stand for no container: dots, empty parts, unsafe characters")
    func refused() {
        for folder in ["iCloud.md", "~iCloud", "iCloud~", "iCloud~~x", "a b", "a/b", "", "é~x"] {
            #expect(ContainerFolder.container(named: folder) == nil, "\(folder)")
        }
    }
}
