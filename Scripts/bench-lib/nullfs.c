// The FUSE floor for Scripts/bench: a FUSE daemon that does as little as a filesystem can.
// Names and sizes live in memory, written bytes are dropped, every reply is immediate. The
// time W3 and W7 take on it is the cost of the kernel's FUSE round trips on this machine,
// which no FUSE filesystem can beat. Not part of icloudfs.
//
// Usage: nullfs MOUNTPOINT (stays in the foreground; unmount with fusermount3 -u).
#define FUSE_USE_VERSION 34
#include <errno.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES (1 << 20)
#define SLOTS (1 << 21)  // open-addressed (parent, name) -> inode index, at most half full

struct node {
    char *name;  // NULL once removed
    fuse_ino_t parent;
    mode_t mode;
    off_t size;
    nlink_t nlink;
    char *target;
};

static struct node *nodes;
static fuse_ino_t *slots;
static fuse_ino_t count = 2;  // 1 is the root
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static size_t slot_of(fuse_ino_t parent, const char *name) {
    size_t hash = 1469598103934665603ULL ^ parent;
    for (const char *c = name; *c; c++) hash = (hash ^ (unsigned char)*c) * 1099511628211ULL;
    return hash & (SLOTS - 1);
}

static fuse_ino_t find(fuse_ino_t parent, const char *name) {
    for (size_t s = slot_of(parent, name); slots[s]; s = (s + 1) & (SLOTS - 1)) {
        struct node *n = &nodes[slots[s]];
        if (n->name && n->parent == parent && strcmp(n->name, name) == 0) return slots[s];
    }
    return 0;
}

// Called with `lock` held; 0 when full.
static fuse_ino_t add(fuse_ino_t parent, const char *name, mode_t mode) {
    if (count == MAX_NODES) return 0;
    fuse_ino_t ino = count++;
    nodes[ino] = (struct node){strdup(name), parent, mode, 0, S_ISDIR(mode) ? 2 : 1, NULL};
    size_t s = slot_of(parent, name);
    while (slots[s]) s = (s + 1) & (SLOTS - 1);
    slots[s] = ino;
    return ino;
}

static void fill(fuse_ino_t ino, struct stat *st) {
    memset(st, 0, sizeof *st);
    st->st_ino = ino;
    st->st_mode = nodes[ino].mode;
    st->st_nlink = nodes[ino].nlink;
    st->st_size = nodes[ino].size;
    st->st_blksize = 4096;
}

static struct fuse_entry_param entry(fuse_ino_t ino) {
    struct fuse_entry_param e;
    memset(&e, 0, sizeof e);
    e.ino = ino;
    e.generation = 1;
    e.attr_timeout = 1;  // as icloudfs
    e.entry_timeout = 1;
    fill(ino, &e.attr);
    return e;
}

static void reply_new(fuse_req_t req, fuse_ino_t ino) {
    if (!ino) return (void)fuse_reply_err(req, ENOSPC);
    struct fuse_entry_param e = entry(ino);
    fuse_reply_entry(req, &e);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name) {
    pthread_mutex_lock(&lock);
    fuse_ino_t ino = find(parent, name);
    pthread_mutex_unlock(&lock);
    if (!ino) return (void)fuse_reply_err(req, ENOENT);
    reply_new(req, ino);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) {
    struct stat st;
    fill(ino, &st);
    fuse_reply_attr(req, &st, 1);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set, struct fuse_file_info *fi) {
    if (to_set & FUSE_SET_ATTR_SIZE) nodes[ino].size = attr->st_size;
    if (to_set & FUSE_SET_ATTR_MODE) nodes[ino].mode = (nodes[ino].mode & S_IFMT) | (attr->st_mode & 07777);
    op_getattr(req, ino, fi);
}

static void make(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, const char *target) {
    pthread_mutex_lock(&lock);
    int exists = find(parent, name) != 0;
    fuse_ino_t ino = exists ? 0 : add(parent, name, mode);
    if (ino && target) {
        nodes[ino].target = strdup(target);
        nodes[ino].size = strlen(target);
    }
    pthread_mutex_unlock(&lock);
    if (exists) return (void)fuse_reply_err(req, EEXIST);
    reply_new(req, ino);
}

static void op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode) {
    make(req, parent, name, S_IFDIR | (mode & 07777), NULL);
}

static void op_symlink(fuse_req_t req, const char *target, fuse_ino_t parent, const char *name) {
    make(req, parent, name, S_IFLNK | 0777, target);
}

static void op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, struct fuse_file_info *fi) {
    pthread_mutex_lock(&lock);
    fuse_ino_t ino = find(parent, name);
    int exists = ino != 0;
    if (!exists) ino = add(parent, name, S_IFREG | (mode & 07777));
    pthread_mutex_unlock(&lock);
    if (exists && (fi->flags & O_EXCL)) return (void)fuse_reply_err(req, EEXIST);
    if (!ino) return (void)fuse_reply_err(req, ENOSPC);
    struct fuse_entry_param e = entry(ino);
    fuse_reply_create(req, &e, fi);
}

static void op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t parent, const char *name) {
    nodes[ino].nlink++;  // the second name is not indexed: enough for timing
    reply_new(req, ino);
}

static void op_readlink(fuse_req_t req, fuse_ino_t ino) { fuse_reply_readlink(req, nodes[ino].target); }

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) { fuse_reply_open(req, fi); }

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off, struct fuse_file_info *fi) {
    if (off + (off_t)size > nodes[ino].size) nodes[ino].size = off + size;
    fuse_reply_write(req, size);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi) {
    fuse_reply_buf(req, NULL, 0);
}

static void op_done(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi) { fuse_reply_err(req, 0); }

// As icloudfs answers names outside user.* (the kernel asks security.capability per write).
static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size) { fuse_reply_err(req, ENOTSUP); }

static void op_remove(fuse_req_t req, fuse_ino_t parent, const char *name) {
    pthread_mutex_lock(&lock);
    fuse_ino_t ino = find(parent, name);
    if (ino) {
        free(nodes[ino].name);
        nodes[ino].name = NULL;
    }
    pthread_mutex_unlock(&lock);
    fuse_reply_err(req, ino ? 0 : ENOENT);
}

static void op_readdir(fuse_req_t req, fuse_ino_t folder, size_t size, off_t off, struct fuse_file_info *fi) {
    char buffer[65536];
    size_t room = size < sizeof buffer ? size : sizeof buffer, used = 0;
    struct stat st;
    memset(&st, 0, sizeof st);
    pthread_mutex_lock(&lock);
    for (fuse_ino_t i = off + 2; i < count; i++) {  // the offset of an entry is its inode - 1
        if (!nodes[i].name || nodes[i].parent != folder) continue;
        st.st_ino = i;
        st.st_mode = nodes[i].mode;
        size_t n = fuse_add_direntry(req, buffer + used, room - used, nodes[i].name, &st, i - 1);
        if (n > room - used) break;
        used += n;
    }
    pthread_mutex_unlock(&lock);
    fuse_reply_buf(req, buffer, used);
}

// The connection as icloudfs asks for it (Sources/FuseAdapter/FuseOperations.swift), so
// that the floor pays for the same kernel behaviour: request sizes, parallel lookups, O_TRUNC
// with open, splicing, no page cache invalidation on mtime changes.
static void op_init(void *userdata, struct fuse_conn_info *conn) {
    (void)userdata;
    conn->max_write = (1 << 20) - 4096;
    conn->max_readahead = 1 << 20;
    unsigned wanted[] = {FUSE_CAP_PARALLEL_DIROPS, FUSE_CAP_ATOMIC_O_TRUNC, FUSE_CAP_SPLICE_WRITE,
                         FUSE_CAP_SPLICE_MOVE, FUSE_CAP_SPLICE_READ};
    for (size_t i = 0; i < sizeof wanted / sizeof *wanted; i++)
        if (conn->capable & wanted[i]) conn->want |= wanted[i];
    conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
}

static const struct fuse_lowlevel_ops operations = {
    .init = op_init, .lookup = op_lookup, .getattr = op_getattr, .setattr = op_setattr, .mkdir = op_mkdir,
    .symlink = op_symlink, .create = op_create, .link = op_link, .readlink = op_readlink,
    .open = op_open, .read = op_read, .write = op_write, .flush = op_done, .release = op_done,
    .getxattr = op_getxattr, .unlink = op_remove, .rmdir = op_remove, .opendir = op_open,
    .readdir = op_readdir, .releasedir = op_done,
};

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: nullfs MOUNTPOINT\n");
        return 2;
    }
    nodes = calloc(MAX_NODES, sizeof *nodes);
    slots = calloc(SLOTS, sizeof *slots);
    nodes[1] = (struct node){"", 0, S_IFDIR | 0755, 0, 2, NULL};
    struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
    fuse_opt_add_arg(&args, "nullfs");
    struct fuse_session *session = fuse_session_new(&args, &operations, sizeof operations, NULL);
    if (!session || fuse_session_mount(session, argv[1]) != 0) return 1;
    struct fuse_loop_config config = {.clone_fd = 0, .max_idle_threads = 10};
    int result = fuse_session_loop_mt(session, &config);
    fuse_session_unmount(session);
    fuse_session_destroy(session);
    return result != 0;
}
