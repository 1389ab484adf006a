/*
** file.c -- files that survive a crash and a full disk, and directories made
** and removed without a shell.
**
** Tuning logs are the product of hours of measurement, so every write is
** checked and reported with the file and the errno:
**   tl_file_append   open a log for appending records. A file whose last byte
**                    is not a newline (a torn line: the writer died mid-record)
**                    gets a newline first, so the next record starts a line.
**   tl_file_replace  a new version of a file, written to a temporary file
**                    beside it; tl_file_close syncs it, renames it over the
**                    old one and syncs the directory. The old file stays
**                    whole until the new one is durable: a crash at any point
**                    leaves one of the two complete.
**   tl_file_write, tl_file_sync (fsync), tl_file_close (sync, close, commit).
**   tl_file_free     drop a handle without committing (a replacement's
**                    temporary file is removed).
** Directories:
**   tl_mkdirs        mkdir -p (the last component must end up a directory).
**   tl_path_remove   rm -rf that never follows a symbolic link: a link is
**                    removed, never its target.
**   tl_tmpdir_make   a private directory <base>/<prefix>-<pid>-XXXXXX (mkdtemp,
**                    mode 0700); the first call of a process for a base and
**                    prefix first removes that prefix's directories left by
**                    dead processes of the same user (a tuner killed with
**                    SIGKILL cannot clean up).
*/
#define _GNU_SOURCE
#include "base.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

struct tl_file {
  int fd;
  int regular;                 /* a regular file: fsync must work */
  int dir_dirty;               /* created here: the directory entry needs a sync */
  char *path;                  /* the file as named */
  char *tmp;                   /* a replacement's temporary file, else NULL */
};

static const char *errname(int e) {
  const char *n = strerrorname_np(e);
  return n ? n : "?";
}

static int io_err(tl_ctx *ctx, const char *what, const char *path, int e) {
  return tl_err(ctx, TL_E_IO, "cannot %s '%s': %s (%s)", what, path, strerror(e), errname(e));
}

static char *dir_of(const char *path) {
  const char *slash = strrchr(path, '/');
  if (!slash) return tl_strdup(".");
  if (slash == path) return tl_strdup("/");
  char *d = tl_strdup(path);
  d[slash - path] = 0;
  return d;
}

static int sync_dir(tl_ctx *ctx, const char *path) {
  char *d = dir_of(path);
  int fd = open(d, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  int rc = TL_OK;
  if (fd < 0) {
    rc = io_err(ctx, "open the directory", d, errno);
  } else {
    if (fsync(fd) != 0 && errno != EINVAL) rc = io_err(ctx, "sync the directory", d, errno);
    close(fd);
  }
  free(d);
  return rc;
}

static tl_file *file_new(int fd, const char *path) {
  tl_file *f = tl_calloc(1, sizeof *f);
  struct stat st;
  f->fd = fd;
  f->regular = fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
  f->path = tl_strdup(path);
  return f;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

TL_EXPORT int tl_file_append(tl_ctx *ctx, const char *path, tl_file **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_file_append: out is NULL");
  *out = NULL;
  if (!path || !*path) return tl_err(ctx, TL_E_ARG, "tl_file_append: expected a file name");
  int created = 0;
  int fd = open(path, O_RDWR | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd >= 0) created = 1;
  else if (errno == EEXIST) fd = open(path, O_RDWR | O_APPEND | O_CLOEXEC);
  if (fd < 0 && (errno == EACCES || errno == EISDIR || errno == EPERM))
    fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC); /* no tail check possible */
  if (fd < 0) return io_err(ctx, "open", path, errno);
  tl_file *f = file_new(fd, path);
  f->dir_dirty = created;
  struct stat st;
  if (f->regular && fstat(fd, &st) == 0 && st.st_size > 0) {
    char last = '\n';
    if (pread(fd, &last, 1, st.st_size - 1) == 1 && last != '\n' && write_all(fd, "\n", 1) != 0) {
      int rc = io_err(ctx, "write", path, errno);
      tl_file_free(f);
      return rc;
    }
  }
  *out = f;
  return TL_OK;
}

TL_EXPORT int tl_file_replace(tl_ctx *ctx, const char *path, tl_file **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_file_replace: out is NULL");
  *out = NULL;
  if (!path || !*path) return tl_err(ctx, TL_E_ARG, "tl_file_replace: expected a file name");
  static int counter;
  char *tmp = tl_sprintf("%s.part-%d-%d", path, (int)getpid(), __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
  int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0 && errno == EEXIST) { /* left by a dead process of the same pid */
    unlink(tmp);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  }
  if (fd < 0) {
    int rc = io_err(ctx, "create", tmp, errno);
    free(tmp);
    return rc;
  }
  tl_file *f = file_new(fd, path);
  f->tmp = tmp;
  *out = f;
  return TL_OK;
}

TL_EXPORT int tl_file_write(tl_ctx *ctx, tl_file *f, const char *data, size_t len) {
  if (!f || f->fd < 0) return tl_err(ctx, TL_E_ARG, "tl_file_write: the file is closed");
  if (write_all(f->fd, data, len) != 0) return io_err(ctx, "write", f->tmp ? f->tmp : f->path, errno);
  return TL_OK;
}

TL_EXPORT int tl_file_sync(tl_ctx *ctx, tl_file *f) {
  if (!f || f->fd < 0) return tl_err(ctx, TL_E_ARG, "tl_file_sync: the file is closed");
  if (fsync(f->fd) != 0 && (f->regular || (errno != EINVAL && errno != EROFS)))
    return io_err(ctx, "sync", f->tmp ? f->tmp : f->path, errno);
  if (f->dir_dirty) {
    int rc = sync_dir(ctx, f->path);
    if (rc) return rc;
    f->dir_dirty = 0;
  }
  return TL_OK;
}

TL_EXPORT int tl_file_close(tl_ctx *ctx, tl_file *f) {
  if (!f) return TL_OK;
  int rc = tl_file_sync(ctx, f);
  if (rc == TL_OK) {
    if (close(f->fd) != 0 && errno != EINTR) rc = io_err(ctx, "close", f->tmp ? f->tmp : f->path, errno);
    f->fd = -1;
  }
  if (rc == TL_OK && f->tmp) {
    if (rename(f->tmp, f->path) != 0) {
      rc = tl_err(ctx, TL_E_IO, "cannot rename '%s' to '%s': %s (%s)", f->tmp, f->path,
                  strerror(errno), errname(errno));
    } else {
      free(f->tmp);
      f->tmp = NULL;
      rc = sync_dir(ctx, f->path);
    }
  }
  tl_file_free(f);
  return rc;
}

TL_EXPORT void tl_file_free(tl_file *f) {
  if (!f) return;
  if (f->fd >= 0) close(f->fd);
  if (f->tmp) unlink(f->tmp);
  free(f->tmp);
  free(f->path);
  free(f);
}

/* ---- whole files ---------------------------------------------------------------- */

int tl_read_file(tl_ctx *ctx, const char *path, char **out, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return tl_err(ctx, TL_E_IO, "cannot open '%s': %s", path, strerror(errno));
  tl_buf b = {0};
  char tmp[65536];
  size_t n;
  while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) tl_buf_putn(&b, tmp, n);
  int bad = ferror(f);
  fclose(f);
  if (bad) {
    tl_buf_free(&b);
    return tl_err(ctx, TL_E_IO, "error reading '%s'", path);
  }
  if (len) *len = b.n;
  *out = tl_buf_take(&b);
  return TL_OK;
}

int tl_write_file_atomic(tl_ctx *ctx, const char *path, const void *data, size_t len) {
  tl_file *f;
  int rc = tl_file_replace(ctx, path, &f);
  if (rc) return rc;
  rc = tl_file_write(ctx, f, data, len);
  if (rc) {
    tl_file_free(f);
    return rc;
  }
  return tl_file_close(ctx, f);
}

/* ---- directories ------------------------------------------------------------------ */

TL_EXPORT int tl_mkdirs(tl_ctx *ctx, const char *path) {
  if (!path || !*path) return tl_err(ctx, TL_E_ARG, "tl_mkdirs: expected a directory name");
  char *p = tl_strdup(path);
  for (char *s = p + 1; *s; s++) {
    if (*s == '/') {
      *s = 0;
      if (mkdir(p, 0755) != 0 && errno != EEXIST) goto fail;
      *s = '/';
    }
  }
  if (mkdir(p, 0755) != 0 && errno != EEXIST) goto fail;
  struct stat st;
  if (stat(p, &st) != 0) goto fail;
  if (!S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    goto fail;
  }
  free(p);
  return TL_OK;
fail:;
  int rc = io_err(ctx, "create the directory", p, errno);
  free(p);
  return rc;
}

/* Remove name in the directory dfd; a directory with its contents, never
** following a link. depth bounds the descent. */
static int remove_at(int dfd, const char *name, int depth) {
  if (unlinkat(dfd, name, 0) == 0 || errno == ENOENT) return 0;
  if (errno != EISDIR && errno != EPERM) return -1;
  if (depth > 64) {
    errno = ELOOP;
    return -1;
  }
  int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return -1;
  DIR *d = fdopendir(fd);
  if (!d) {
    close(fd);
    return -1;
  }
  int rc = 0, e = 0;
  struct dirent *de;
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if (remove_at(fd, de->d_name, depth + 1) != 0 && !rc) {
      rc = -1;
      e = errno;
    }
  }
  closedir(d);
  if (rc) {
    errno = e;
    return -1;
  }
  if (unlinkat(dfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT) return -1;
  return 0;
}

TL_EXPORT int tl_path_remove(tl_ctx *ctx, const char *path) {
  if (!path || !*path) return tl_err(ctx, TL_E_ARG, "tl_path_remove: expected a path");
  if (remove_at(AT_FDCWD, path, 0) != 0) return io_err(ctx, "remove", path, errno);
  return TL_OK;
}

/* Remove <base>/<prefix>-<pid>-* directories of dead processes owned by us. */
static void sweep_stale(const char *base, const char *prefix) {
  int bfd = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (bfd < 0) return;
  DIR *d = fdopendir(bfd);
  if (!d) {
    close(bfd);
    return;
  }
  size_t pl = strlen(prefix);
  struct dirent *de;
  while ((de = readdir(d))) {
    const char *n = de->d_name;
    if (strncmp(n, prefix, pl) != 0 || n[pl] != '-') continue;
    char *end;
    long pid = strtol(n + pl + 1, &end, 10);
    if (end == n + pl + 1 || *end != '-' || pid <= 0 || pid > INT_MAX) continue;
    if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
    struct stat st;
    if (fstatat(bfd, n, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
    remove_at(bfd, n, 0);
  }
  closedir(d);
}

/* 1 the first time this process asks for (base, prefix): a resumed tuner that made another
** kind of directory first (its log's, a test's) still removes what a killed tuner left under
** the measurement prefix. Remembers up to 64 pairs, then sweeps every time. */
static int first_use(const char *base, const char *prefix) {
  /* lock-free (a forked child must not find a lock held): two threads asking at once may
  ** both sweep, which is harmless */
  static uint64_t seen[64];
  static int nseen;
  uint64_t h = tl_hash_bytes(prefix, strlen(prefix), tl_hash_bytes(base, strlen(base) + 1, 0));
  int n = __atomic_load_n(&nseen, __ATOMIC_ACQUIRE);
  for (int i = 0; i < n && i < 64; i++)
    if (__atomic_load_n(&seen[i], __ATOMIC_RELAXED) == h) return 0;
  if (n >= 64) return 1;
  int k = __atomic_fetch_add(&nseen, 1, __ATOMIC_ACQ_REL);
  if (k < 64) __atomic_store_n(&seen[k], h, __ATOMIC_RELEASE);
  return 1;
}

TL_EXPORT int tl_tmpdir_make(tl_ctx *ctx, const char *base, const char *prefix, char *out, size_t cap) {
  if (!base || !*base || !prefix || !*prefix || strchr(prefix, '/') || !out)
    return tl_err(ctx, TL_E_ARG, "tl_tmpdir_make: expected a base directory and a prefix");
  int rc = tl_mkdirs(ctx, base);
  if (rc) return rc;
  if (first_use(base, prefix)) sweep_stale(base, prefix);
  char *t = tl_sprintf("%s/%s-%d-XXXXXX", base, prefix, (int)getpid());
  if (strlen(t) + 1 > cap) {
    free(t);
    return tl_err(ctx, TL_E_ARG, "tl_tmpdir_make: the directory name under '%s' is too long", base);
  }
  if (!mkdtemp(t)) {
    rc = io_err(ctx, "create a directory in", base, errno);
    free(t);
    return rc;
  }
  memcpy(out, t, strlen(t) + 1);
  free(t);
  return TL_OK;
}
