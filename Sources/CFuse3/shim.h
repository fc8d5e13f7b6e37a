#ifndef ICLOUDFS_CFUSE3_SHIM_H
#define ICLOUDFS_CFUSE3_SHIM_H
// fuse_lowlevel.h refuses to compile without FUSE_USE_VERSION; 314 selects the 3.12+ API
// (fuse_session_loop_mt with a fuse_loop_config). Debian 12 ships libfuse 3.14.
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <sys/xattr.h>

// fuse_session_loop_mt is a macro choosing a versioned symbol; Swift imports no
// function-like macros, so this wrapper names it.
static inline int icloudfs_session_loop_mt(struct fuse_session *se, struct fuse_loop_config *config) {
    return fuse_session_loop_mt(se, config);
}
#endif
