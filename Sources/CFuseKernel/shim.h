#ifndef ICLOUDFS_CFUSEKERNEL_SHIM_H
#define ICLOUDFS_CFUSEKERNEL_SHIM_H
// The FUSE kernel protocol's structures, as the kernel's own uapi header defines them
// (linux-libc-dev; Debian 12's describes protocol 7.38), plus what later protocol versions
// added that this filesystem uses (passthrough: 7.40). No library: the protocol is spoken
// by Sources/FuseKernel.
#include <linux/fuse.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <stdint.h>
#include <errno.h>
#include <string.h>

// fuse_init_out.flags2 (bits 32..63 of the init flags): FUSE_PASSTHROUGH is bit 37.
#define ICLOUDFS_FUSE_PASSTHROUGH_FLAG2 32
// fuse_open_out.open_flags: the kernel reads and writes the backing file itself.
#define ICLOUDFS_FOPEN_PASSTHROUGH (1u << 7)
// The last protocol minor version whose requests this filesystem knows.
#define ICLOUDFS_FUSE_KERNEL_MINOR 45
// FUSE_STATX (7.39): answered with ENOSYS, after which the kernel asks with GETATTR.
#define ICLOUDFS_FUSE_STATX 52

// What FUSE_DEV_IOC_BACKING_OPEN takes (7.40): a file the kernel reads and writes for
// passthrough opens of one inode.
struct icloudfs_fuse_backing_map {
    int32_t fd;
    uint32_t flags;
    uint64_t padding;
};

static inline int icloudfs_fuse_backing_open(int device, int fd) {
    struct icloudfs_fuse_backing_map map = { .fd = fd, .flags = 0, .padding = 0 };
    return ioctl(device, _IOW(229, 1, struct icloudfs_fuse_backing_map), &map);
}

static inline int icloudfs_fuse_backing_close(int device, uint32_t backing_id) {
    return ioctl(device, _IOW(229, 2, uint32_t), &backing_id);
}

// Descriptor passing from fusermount3 (mounts by users): one SCM_RIGHTS descriptor.
static inline int icloudfs_receive_descriptor(int socket) {
    char byte;
    struct iovec vector = { .iov_base = &byte, .iov_len = 1 };
    char control[CMSG_SPACE(sizeof(int))];
    struct msghdr message = { 0 };
    message.msg_iov = &vector;
    message.msg_iovlen = 1;
    message.msg_control = control;
    message.msg_controllen = sizeof(control);
    ssize_t received;
    do {
        received = recvmsg(socket, &message, MSG_CMSG_CLOEXEC);
    } while (received < 0 && errno == EINTR);
    if (received <= 0) return -1;
    struct cmsghdr *header = CMSG_FIRSTHDR(&message);
    if (header == NULL || header->cmsg_level != SOL_SOCKET || header->cmsg_type != SCM_RIGHTS) return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(header), sizeof(int));
    return fd;
}
#endif
