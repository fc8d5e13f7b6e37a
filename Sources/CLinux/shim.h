#ifndef ICLOUDFS_CLINUX_SHIM_H
#define ICLOUDFS_CLINUX_SHIM_H
#include <stddef.h>
#include <sys/xattr.h>
// Linux calls that Swift's Glibc module does not show: syncfs, copy_file_range and fallocate (declared only under
// _GNU_SOURCE, which the module is built without), malloc_trim and mallopt (malloc.h is not
// in the module). The prototypes are glibc's own.
int syncfs(int fd);
int malloc_trim(size_t pad);
int mallopt(int param, int value);
#define ICLOUDFS_M_ARENA_MAX (-8)
#define ICLOUDFS_M_MMAP_THRESHOLD (-3)
// lseek's SEEK_DATA (also _GNU_SOURCE only): where the next bytes that are not a hole start.
#define ICLOUDFS_SEEK_DATA 3
// and SEEK_HOLE: where the next hole starts (the end of the file counts as one).
#define ICLOUDFS_SEEK_HOLE 4
#include <sys/types.h>
// copy_file_range (_GNU_SOURCE only): copies between two files inside the kernel.
ssize_t copy_file_range(int infd, __off64_t *pinoff, int outfd, __off64_t *poutoff, size_t length, unsigned int flags);
// fallocate (_GNU_SOURCE only) and the flags of linux/falloc.h.
int fallocate(int fd, int mode, __off64_t offset, __off64_t len);
#define ICLOUDFS_FALLOC_FL_KEEP_SIZE 0x01
#define ICLOUDFS_FALLOC_FL_PUNCH_HOLE 0x02
// open's O_TMPFILE (this bit with O_DIRECTORY) and linkat's AT_EMPTY_PATH, _GNU_SOURCE only:
// the values of asm-generic (x86-64, arm64 and most others).
#define ICLOUDFS_O_TMPFILE_BIT 020000000
#define ICLOUDFS_AT_EMPTY_PATH 0x1000
// open's O_NOATIME (_GNU_SOURCE only): reads leave the file's access time alone.
#define ICLOUDFS_O_NOATIME 01000000
// getrandom (sys/random.h, not in the module): the kernel's random bytes, many per call.
ssize_t getrandom(void *buf, size_t buflen, unsigned int flags);
#include <stdint.h>
// libFuzzer's driver (compiler-rt, LLVM 11+), for the fuzz build's own entry point
// (Tests/Fuzz/Main): declared here only, linked only with -sanitize=fuzzer.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
#endif
