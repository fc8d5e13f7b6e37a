#ifndef ICLOUDFS_CLINUX_SHIM_H
#define ICLOUDFS_CLINUX_SHIM_H
// Linux calls glibc declares only under _GNU_SOURCE, which Swift's Glibc module is built
// without. The prototypes are glibc's own.
int syncfs(int fd);
#endif
