#ifndef ICLOUDFS_CFUSE3_SHIM_H
#define ICLOUDFS_CFUSE3_SHIM_H
// fuse_lowlevel.h refuses to compile without FUSE_USE_VERSION; 314 selects the 3.12+ API
// (fuse_session_loop_mt with a fuse_loop_config). Debian 12 ships libfuse 3.14.
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#endif
