// W13 of Scripts/bench: COUNT appends of 4-byte records to one file, one write(2) per record,
// no buffering in between: what a logger that writes each record as it comes does. Written in
// C so that the figure is the filesystem's cost per write, not an interpreter's per call.
// Not part of icloudfs.
//
// Usage: appender PATH COUNT
// Creates (or truncates) PATH, opens it O_APPEND, writes COUNT records (the record's number,
// 4 bytes little-endian, so that no two neighbouring records are alike), closes it and prints
// the seconds from the open to the end of the close (a close is where a FUSE filesystem is told
// of the flush), then checks that PATH holds COUNT × 4 bytes.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: appender PATH COUNT\n");
        return 2;
    }
    const char *path = argv[1];
    long count = strtol(argv[2], NULL, 10);
    // Made empty first, outside the timed part: the workload is the appends, not a truncate.
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || close(fd) != 0) {
        fprintf(stderr, "appender: %s: %s\n", path, strerror(errno));
        return 1;
    }
    double start = now();
    fd = open(path, O_WRONLY | O_APPEND);
    if (fd < 0) {
        fprintf(stderr, "appender: open %s: %s\n", path, strerror(errno));
        return 1;
    }
    for (long n = 0; n < count; n++) {
        uint32_t v = (uint32_t)n;
        unsigned char record[4] = {v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, v >> 24};
        ssize_t written = write(fd, record, sizeof record);
        if (written != (ssize_t)sizeof record) {
            fprintf(stderr, "appender: write %ld of %s: %s\n", n, path,
                    written < 0 ? strerror(errno) : "short write");
            return 1;
        }
    }
    if (close(fd) != 0) {
        fprintf(stderr, "appender: close %s: %s\n", path, strerror(errno));
        return 1;
    }
    double seconds = now() - start;
    // A filesystem that lost or reordered appends is broken, whatever its speed.
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "appender: stat %s: %s\n", path, strerror(errno));
        return 1;
    }
    if (st.st_size != (off_t)count * 4) {
        fprintf(stderr, "appender: %s holds %lld bytes, not %ld\n", path, (long long)st.st_size, count * 4);
        return 1;
    }
    printf("%.6f\n", seconds);
    return 0;
}
