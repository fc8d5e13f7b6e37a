/// Fields of the kernel's mount tables (/proc/self/mounts, /proc/self/mountinfo).
public enum MountTable {
    /// A field as it is: the tables write space, tab, newline and backslash as octal
    /// escapes (`\040`).
    public static func unescaped(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "\\"), utf8.count >= 3,
                let value = UInt8(String(decoding: utf8.prefix(3), as: UTF8.self), radix: 8)
            {
                bytes.append(value)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
