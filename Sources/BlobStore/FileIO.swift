import CLinux
import Foundation
import SystemPackage

#if canImport(Glibc)
import Glibc
#endif

/// Whole-buffer positional reads and writes over `FileDescriptor`, retrying short transfers.
public enum FileIO {
    public static func readAll(_ fd: FileDescriptor) throws(Errno) -> Data {
        var info = stat()
        guard fstat(fd.rawValue, &info) == 0 else { throw Errno(rawValue: errno) }
        return try read(fd, offset: 0, count: Int(info.st_size))
    }

    /// Up to `count` bytes from `offset`; fewer only at the end of the file.
    public static func read(_ fd: FileDescriptor, offset: UInt64, count: Int) throws(Errno) -> Data {
        // Read into memory that is not zeroed first (`Data(count:)` clears every byte: a
        // megabyte per chunk a download reads).
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
        var done = 0
        do {
            while done < count {
                let n = try fd.read(fromAbsoluteOffset: Int64(offset) + Int64(done), into: UnsafeMutableRawBufferPointer(rebasing: buffer[done..<count]))
                if n == 0 { break }
                done += n
            }
        } catch {
            buffer.deallocate()
            throw (error as? Errno) ?? .ioError
        }
        return Data(bytesNoCopy: buffer.baseAddress!, count: done, deallocator: .custom { pointer, _ in pointer.deallocate() })
    }

    /// Calls `body` with `count` bytes of the file from `offset`, a block at a time, read into
    /// one small buffer: no large new buffer (zero-filled pages and an munmap per call), and
    /// no mapping (a file truncated under a mapping kills the process with SIGBUS). Fewer
    /// bytes only at the end of the file.
    public static func forEachBlock(
        _ fd: FileDescriptor, offset: UInt64, count: Int, _ body: (UnsafeRawBufferPointer) throws -> Void
    ) throws {
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: blockSize, alignment: 4096)
        defer { buffer.deallocate() }
        var done = 0
        while done < count {
            let wanted = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<min(blockSize, count - done)])
            let n = try fd.read(fromAbsoluteOffset: Int64(offset) + Int64(done), into: wanted)
            if n == 0 { break }
            try body(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            done += n
        }
    }

    /// Below glibc's mmap threshold (256 KiB, set by the daemon): taken from the heap.
    static let blockSize = 128 << 10

    public static func writeAll(_ fd: FileDescriptor, _ data: Data, offset: UInt64) throws(Errno) {
        do {
            try data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) throws in
                var done = 0
                while done < buffer.count {
                    let slice = UnsafeRawBufferPointer(rebasing: buffer[done...])
                    done += try fd.write(toAbsoluteOffset: Int64(offset) + Int64(done), slice)
                }
            }
        } catch let error as Errno {
            throw error
        } catch {
            throw .ioError
        }
    }

    /// Writes `pieces` back to back from `offset` in as few `pwritev` calls as the kernel
    /// allows: one call for a whole run, so the page cache holds it in folios as large as the
    /// run (a run split into one write per piece is cut into small folios at each edge).
    public static func writeAll(_ fd: FileDescriptor, _ pieces: [Data], offset: UInt64) throws(Errno) {
        guard pieces.count > 1 else {
            if let piece = pieces.first { try writeAll(fd, piece, offset: offset) }
            return
        }
        do {
            try withBuffers(pieces[...], []) { buffers in
                var vectors = buffers.map { iovec(iov_base: UnsafeMutableRawPointer(mutating: $0.baseAddress), iov_len: $0.count) }
                var next = 0
                var position = Int64(offset)
                while next < vectors.count {
                    let count = min(vectors.count - next, 1024)  // IOV_MAX
                    let written = vectors.withUnsafeMutableBufferPointer { pwritev(fd.rawValue, $0.baseAddress! + next, Int32(count), __off_t(position)) }
                    if written < 0 {
                        if errno == EINTR { continue }
                        throw Errno(rawValue: errno)
                    }
                    position += Int64(written)
                    // Step past what was written; a short write resumes inside a vector.
                    var left = written
                    while next < vectors.count, left >= vectors[next].iov_len {
                        left -= vectors[next].iov_len
                        next += 1
                    }
                    if left > 0 {
                        vectors[next].iov_base = vectors[next].iov_base.map { $0 + left }
                        vectors[next].iov_len -= left
                    }
                }
            }
        } catch let error as Errno {
            throw error
        } catch {
            throw .ioError
        }
    }

    /// Calls `body` with the bytes of every one of `pieces`, in order, without copying them.
    private static func withBuffers(
        _ pieces: ArraySlice<Data>, _ gathered: [UnsafeRawBufferPointer], _ body: ([UnsafeRawBufferPointer]) throws -> Void
    ) throws {
        guard let first = pieces.first else { return try body(gathered) }
        try first.withUnsafeBytes { try withBuffers(pieces.dropFirst(), gathered + [$0], body) }
    }

    /// Copies up to `count` bytes from `offset` of `source` to `targetOffset` of `target` inside
    /// the kernel (`copy_file_range`: no bytes through our memory; extents shared where the
    /// filesystem can). Fewer only at the end of `source`. Returns how many were copied.
    public static func copyRange(
        from source: FileDescriptor, at offset: UInt64, to target: FileDescriptor, at targetOffset: UInt64, count: Int
    ) throws(Errno) -> Int {
        var sourceOffset = __off64_t(offset)
        var targetOffset = __off64_t(targetOffset)
        var done = 0
        while done < count {
            let n = copy_file_range(source.rawValue, &sourceOffset, target.rawValue, &targetOffset, count - done, 0)
            if n < 0 {
                if errno == EINTR { continue }
                throw Errno(rawValue: errno)
            }
            if n == 0 { break }
            done += n
        }
        return done
    }

    /// Makes `count` bytes from `offset` read as zeros, as a hole where the filesystem can
    /// punch one (no blocks used, nothing written), else by writing zeros. The size stays.
    public static func zero(_ fd: FileDescriptor, offset: UInt64, count: Int) throws(Errno) {
        let mode = ICLOUDFS_FALLOC_FL_PUNCH_HOLE | ICLOUDFS_FALLOC_FL_KEEP_SIZE
        if fallocate(fd.rawValue, mode, __off64_t(offset), __off64_t(count)) == 0 { return }
        guard errno == EOPNOTSUPP else { throw Errno(rawValue: errno) }
        let zeros = Data(count: min(count, 1 << 20))
        var done = 0
        while done < count {
            let step = min(zeros.count, count - done)
            try writeAll(fd, zeros.prefix(step), offset: offset + UInt64(done))
            done += step
        }
    }

    /// Reserves disk blocks for `count` bytes from `offset` without changing the size (where
    /// the filesystem cannot, nothing is reserved: the bytes are written when they are).
    public static func reserve(_ fd: FileDescriptor, offset: UInt64, count: UInt64) throws(Errno) {
        if fallocate(fd.rawValue, ICLOUDFS_FALLOC_FL_KEEP_SIZE, __off64_t(offset), __off64_t(count)) == 0 { return }
        guard errno == EOPNOTSUPP else { throw Errno(rawValue: errno) }
    }

    /// Flushes everything written to the filesystem holding `folder` (one `syncfs`): cheaper
    /// than an fsync per file when many small files were written.
    public static func syncFileSystem(containing folder: String) throws(Errno) {
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw Errno(rawValue: errno) }
        defer { close(fd) }
        guard syncfs(fd) == 0 else { throw Errno(rawValue: errno) }
    }

    /// Replaces the file at `path` with `data` whole, durably: a reader or a crash sees the
    /// old bytes or the new, never a part (a new file beside it, synced, renamed over it).
    public static func replaceFile(_ path: FilePath, with data: Data) throws(Errno) {
        let temporary = FilePath(path.string + ".new")
        do {
            let fd = try FileDescriptor.open(
                temporary, .writeOnly, options: [.create, .truncate, .closeOnExec], permissions: [.ownerReadWrite])
            do {
                try writeAll(fd, data, offset: 0)
                guard fsync(fd.rawValue) == 0 else { throw Errno(rawValue: errno) }
                try fd.close()
            } catch {
                try? fd.close()
                throw error
            }
            guard rename(temporary.string, path.string) == 0 else { throw Errno(rawValue: errno) }
        } catch let error as Errno {
            unlink(temporary.string)
            throw error
        } catch {
            unlink(temporary.string)
            throw Errno.ioError
        }
        let folder = open(path.removingLastComponent().string, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard folder >= 0 else { throw Errno(rawValue: errno) }
        defer { close(folder) }
        guard fsync(folder) == 0 else { throw Errno(rawValue: errno) }
    }

    /// Makes a rename or link in `folder` durable.
    public static func syncDirectory(_ folder: FilePath) throws {
        let fd = open(folder.string, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw StoreError.failed("cannot open folder \(folder): \(Errno(rawValue: errno))") }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw StoreError.failed("fsync of \(folder) failed: \(Errno(rawValue: errno))") }
    }
}
