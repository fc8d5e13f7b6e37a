import BlobStore
import ContainerFormat
import Foundation
import Replica

/// The one mapping from errors to errno values the kernel returns to programs.
enum FuseErrno {
    static func code(for error: any Error, in operation: String) -> Int32 {
        guard let error = error as? ReplicaError else {
            FuseLog.logger.error("\(operation): unexpected error \(error)")
            return EIO
        }
        switch error {
        case .notFound: return ENOENT
        case .exists: return EEXIST
        case .notEmpty: return ENOTEMPTY
        case .notAFolder: return ENOTDIR
        case .isAFolder: return EISDIR
        case .invalidName(let why):
            return why.contains("longer than") ? ENAMETOOLONG : EINVAL
        case .invalidArgument: return EINVAL
        // Evicting a file with changes not yet uploaded, or while it is open.
        case .busy: return EBUSY
        case .notSupported: return ENOTSUP
        case .notPermitted: return EPERM
        case .tooLarge: return EFBIG
        // Another device announced the file but did not finish uploading it in time.
        case .contentNotUploaded(let why):
            FuseLog.logger.warning("\(operation): \(why)")
            return ETIMEDOUT
        // A full cache disk (or quota, or file size limit): programs see ENOSPC as on a
        // local disk, and can free space and go on.
        case .local(let why, let errno) where errno != EIO:
            FuseLog.logger.warning("\(operation): \(why)")
            return errno
        // A failed download or a broken cache: the read cannot give data; the reason is in
        // user.icloud.downloadingError and the log.
        case .identityMismatch, .contentLost, .local, .store, .format:
            FuseLog.logger.warning("\(operation): \(error)")
            return EIO
        }
    }
}
