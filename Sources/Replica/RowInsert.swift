import Foundation
import GRDB
import GRDBSQLite

/// One run of a cached statement with its values bound straight through SQLite's C API.
/// For the rows every small file writes (its queued change, content record, item): GRDB's
/// `StatementArguments` (a checked existential per value, copied into a `DatabaseValue`)
/// took more of the daemon's CPU than SQLite's own insert (W3: 5% of all samples against
/// `sqlite3_step`'s 4.6%). Everything else goes through GRDB.
struct RowInsert {
    private let statement: SQLiteStatement
    private let connection: SQLiteConnection
    /// For an error's message (its `sql` is worked out anew at each read).
    private let cached: Statement
    private var index: Int32 = 0

    init(_ statement: Statement, _ db: Database) {
        self.statement = statement.sqliteStatement
        self.connection = db.sqliteConnection!
        cached = statement
        sqlite3_reset(self.statement)
    }

    /// SQLite copies what it is given (`SQLITE_TRANSIENT`): the values need not outlive
    /// the call.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    private mutating func next() -> Int32 {
        index += 1
        return index
    }

    mutating func bind(_ value: Int64) { sqlite3_bind_int64(statement, next(), value) }
    mutating func bind(_ value: Bool) { bind(Int64(value ? 1 : 0)) }

    mutating func bind(_ value: Int64?) {
        guard let value else { return bindNull() }
        bind(value)
    }

    mutating func bind(_ value: String?) {
        guard var text = value else { return bindNull() }
        let at = next()
        // An empty text or blob is not NULL: SQLite needs an address for it.
        guard !text.isEmpty else {
            sqlite3_bind_text(statement, at, "", 0, RowInsert.transient)
            return
        }
        _ = text.withUTF8 { sqlite3_bind_text(statement, at, $0.baseAddress, Int32($0.count), RowInsert.transient) }
    }

    mutating func bind(_ value: Data?) {
        guard let value else { return bindNull() }
        let at = next()
        guard !value.isEmpty else {
            sqlite3_bind_zeroblob(statement, at, 0)
            return
        }
        _ = value.withUnsafeBytes { sqlite3_bind_blob(statement, at, $0.baseAddress, Int32($0.count), RowInsert.transient) }
    }

    mutating func bindNull() { sqlite3_bind_null(statement, next()) }

    /// Runs the statement once, with the values bound (those not bound are NULL).
    func run() throws {
        let code = sqlite3_step(statement)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        guard code == SQLITE_DONE else {
            throw DatabaseError(
                resultCode: ResultCode(rawValue: sqlite3_extended_errcode(connection)),
                message: String(cString: sqlite3_errmsg(connection)), sql: cached.sql)
        }
    }
}
