/// Rules for item names: what the store may hold, and the names the fold makes.
public enum ItemName {
    public static let maximumBytes = 255

    /// Why `name` cannot be a name, or nil when it can. Names from the store are untrusted.
    public static func problem(with name: String) -> String? {
        if name.isEmpty { return "empty name" }
        if name == "." || name == ".." { return "name \(name) is reserved" }
        if NameBytes.count(name) > maximumBytes { return "name longer than \(maximumBytes) bytes" }
        if name.utf8.contains(UInt8(ascii: "/")) { return "name contains '/'" }
        if name.utf8.contains(0) { return "name contains NUL" }
        return nil
    }

    /// `"notes.txt"` → (`"notes"`, `".txt"`); a leading dot is part of the stem
    /// (`".bashrc"` has no extension).
    public static func split(_ name: String) -> (stem: Substring, extension: Substring) {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else {
            return (name[...], "")
        }
        return (name[..<dot], name[dot...])
    }

    /// `NAME n.EXT`, the name the later of two creates of one name gets (n ≥ 2).
    public static func numbered(_ name: String, _ n: Int) -> String {
        let (stem, ext) = split(name)
        return fitted(stem: stem, suffix: " \(n)\(ext)")
    }

    /// `NAME (conflicted copy from DEVICE YYYY-MM-DD HH.MM.SS).EXT`, time in UTC so that every
    /// device computes the same name.
    public static func conflictCopy(of name: String, device: String, time: Timestamp) -> String {
        let (stem, ext) = split(name)
        // Scalars, not Characters: "/" followed by a combining mark is one Character that is
        // not "/", yet its bytes hold a "/".
        var scalars = String.UnicodeScalarView()
        scalars.append(contentsOf: device.unicodeScalars.map { $0 == "/" || $0 == "\0" ? "-" : $0 })
        let safeDevice = String(String(scalars).prefix(64))
        let suffix = " (conflicted copy from \(safeDevice) \(CivilTime(time).formatted))\(ext)"
        return fitted(stem: stem, suffix: suffix)
    }

    /// `stem + suffix`, the stem shortened (on a character boundary) to fit in 255 bytes.
    /// The stem is part of a valid name and the suffixes hold no `/` or NUL, so the result
    /// is a valid name (tests check this for hostile device names).
    private static func fitted(stem: Substring, suffix: String) -> String {
        var stem = stem
        while NameBytes.count(String(stem)) + suffix.utf8.count > maximumBytes, !stem.isEmpty {
            stem = stem.dropLast()
        }
        var result = String(stem) + suffix
        while NameBytes.count(result) > maximumBytes { result.removeLast() }
        return result
    }
}

/// A UTC calendar date and time, computed without Foundation's calendars (pure, fast).
struct CivilTime {
    var year: Int64, month: Int64, day: Int64, hour: Int64, minute: Int64, second: Int64

    init(_ time: Timestamp) {
        // Clamped so that the arithmetic below cannot overflow, whatever time a commit holds.
        let time = Timestamp(clamping: time.seconds, nanoseconds: 0)
        let days = time.seconds >= 0 ? time.seconds / 86_400 : (time.seconds - 86_399) / 86_400
        let secondOfDay = time.seconds - days * 86_400
        hour = secondOfDay / 3600
        minute = secondOfDay % 3600 / 60
        second = secondOfDay % 60
        // Days since 1970-01-01 to a proleptic Gregorian date (H. Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
    }

    /// `YYYY-MM-DD HH.MM.SS`
    var formatted: String {
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        return "\(year)-\(two(month))-\(two(day)) \(two(hour)).\(two(minute)).\(two(second))"
    }
}
