/*
** proc.c -- child processes with captured output, a wall-clock limit and
** group kill.
**
** The measurement layer never builds or runs a candidate kernel in the tuner's
** own process: a compiler may hang or flood its output, and a generated kernel
** may crash, loop or scribble over memory. It uses
**   tl_proc_exec  run a program (the C compiler, a driver) from argv, and
**   tl_proc_call  fork and run a C function (load and time a kernel) in the
**                 child, which sends its result bytes back through a pipe,
** and reads the outcome from a tl_proc_result: how it ended (TL_PROC_*), the
** exit status or signal, the wall time, and the captured output.
**
** Rules shared by both:
**   - The child leads its own process group. On timeout the whole group gets
**     SIGKILL, so grandchildren (cc1, `sh -c 'a & b'`) die too; when the
**     child ends on its own, whatever it left behind in its group is killed
**     as well: nothing outlives the call. The group is killed while the
**     child is still an unreaped zombie, so its id cannot have been reused.
**   - stdin is /dev/null. stdout and stderr are pipes drained with poll(),
**     so a child writing megabytes to both never blocks; each is kept up to
**     max_output bytes (0 = 1 MiB) and the rest is read and dropped.
**   - The return value is TL_OK whenever the child was started, however it
**     ended. A program that cannot be executed (missing, not executable) is
**     TL_PROC_SPAWN with the errno in tl_proc_code and a message naming it in
**     the result's stderr. Only a failure of the machinery itself (no pipes,
**     no fork) returns an error code with the message in ctx.
**
** tl_proc_call specifics: the child runs fn(arg, out_fd); out_fd is the write
** end of the pipe that becomes the result's stdout. The child's own fds 1 and
** 2 both go to the result's stderr (diagnostics, never the tuner's terminal).
** It exits with fn's return value (low 8 bits) through _exit, so the parent's
** atexit handlers and stdio buffers are not run twice. SIGPIPE is ignored
** there, so a write to a vanished reader fails with EPIPE instead of killing.
**
** Threads: calls may run concurrently. Every descriptor is made close-on-exec
** at creation (pipe2), which covers children that exec. A raw fork() copies
** every descriptor, so the window from creating a call's pipes until its
** parent has closed their write ends is held under one lock that fork() also
** takes (pthread_atfork). Otherwise a sibling child could inherit this call's
** write ends and hold back its end-of-file until the sibling exits.
** Children are reaped with waitpid on their own pid only; a host that reaps
** with waitpid(-1) or ignores SIGCHLD breaks that, and is reported as an error.
*/
#define _GNU_SOURCE
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdio_ext.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define PROC_DEFAULT_MAX ((size_t)1 << 20)
/* After the child is gone (and its group killed), how long a pipe write end
** held by some process outside the group may keep us waiting for EOF. */
#define PROC_DRAIN_GRACE_S 0.5

struct tl_proc_result {
  int status;                  /* TL_PROC_* */
  int code;                    /* exit status, signal number, or errno for SPAWN */
  double seconds;              /* from start to the child's end */
  tl_buf out, err;             /* each at most max_output bytes; s NULL when empty */
};

/* ---- the fork lock ----------------------------------------------------------
** Recursive: the thread that holds it around its own fork() takes it again in
** the prepare handler. In the child it is re-initialised (its owner is gone). */

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t fork_mu;

static void fork_mu_init(void) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  pthread_mutex_init(&fork_mu, &a);
  pthread_mutexattr_destroy(&a);
}
static void fork_prepare(void) { pthread_mutex_lock(&fork_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&fork_mu); }
static void fork_child(void) { fork_mu_init(); }
static void proc_once(void) {
  fork_mu_init();
  pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* ---- descriptors ----------------------------------------------------------- */

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd); /* never retried: on Linux the fd is gone even on EINTR */
  *fd = -1;
}

/* A close-on-exec pipe whose ends are both >= 3, so that dup2 onto 0..2 in a
** child is always a real copy (which clears close-on-exec). */
static int make_pipe(int fds[2]) {
  if (pipe2(fds, O_CLOEXEC) != 0) return -1;
  for (int k = 0; k < 2; k++) {
    if (fds[k] >= 3) continue;
    int nfd = fcntl(fds[k], F_DUPFD_CLOEXEC, 3);
    int e = errno;
    close(fds[k]);
    fds[k] = nfd;
    if (nfd < 0) {
      close_fd(&fds[1 - k]);
      errno = e;
      return -1;
    }
  }
  return 0;
}

static int open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  long fd = syscall(SYS_pidfd_open, pid, 0); /* always close-on-exec */
  return fd >= 0 ? (int)fd : -1;
#else
  (void)pid;
  return -1;
#endif
}

/* 1: the child has ended (left a zombie), 0: running, -1: it is not our
** child any more (reaped elsewhere, or SIGCHLD ignored). */
static int peek_exit(pid_t pid) {
  for (;;) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0)
      return si.si_pid == pid;
    if (errno != EINTR) return -1;
  }
}

static int reap(pid_t pid, int *st) {
  for (;;) {
    if (waitpid(pid, st, 0) == pid) return 0;
    if (errno != EINTR) return -1;
  }
}

/* ---- supervising a started child --------------------------------------------- */

typedef struct {
  int fd;                      /* read end, -1 once at EOF */
  tl_buf *buf;
  size_t limit;                /* buf->n never exceeds it */
} sink;

static void sink_read(sink *s, char *tmp, size_t tmpsize) {
  ssize_t got = read(s->fd, tmp, tmpsize);
  if (got > 0) {
    size_t room = s->limit - s->buf->n;
    tl_buf_putn(s->buf, tmp, (size_t)got < room ? (size_t)got : room);
  } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {
    close_fd(&s->fd);
  }
}

/* Drain the child's pipes until it has ended and they are at EOF, enforce the
** deadline, kill its group, reap it and fill r. Closes fd_out and fd_err. */
static int supervise(tl_ctx *ctx, const char *who, pid_t pid, int fd_out, int fd_err,
                     double t0, double timeout_s, size_t limit, tl_proc_result *r) {
  sink s[2] = {{fd_out, &r->out, limit}, {fd_err, &r->err, limit}};
  int pidfd = open_pidfd(pid);
  double deadline = timeout_s > 0 ? t0 + timeout_s : INFINITY;
  double drain_until = INFINITY, t_end = 0;
  double slice = 1e-4;         /* polling period when there is no pidfd */
  int exited = 0, timed_out = 0, lost = 0, rc = TL_OK;
  size_t tmpsize = 65536;
  char *tmp = tl_malloc(tmpsize);

  for (;;) {
    if (!exited) {
      int e = peek_exit(pid);
      if (e != 0) {
        exited = 1;
        lost = e < 0;
        t_end = tl_now();
        if (!lost) kill(-pid, SIGKILL); /* leftovers; the zombie pins the group id */
        drain_until = t_end + PROC_DRAIN_GRACE_S;
        close_fd(&pidfd);
      }
    }
    if (exited && s[0].fd < 0 && s[1].fd < 0) break;
    double now = tl_now();
    if (!exited && now >= deadline) {
      kill(-pid, SIGKILL);
      timed_out = 1;
      deadline = INFINITY;
      continue;
    }
    if (exited && now >= drain_until) break; /* a write end leaked out of the group */

    struct pollfd pf[3];
    int which[3], np = 0;
    for (int k = 0; k < 2; k++)
      if (s[k].fd >= 0) {
        pf[np].fd = s[k].fd;
        pf[np].events = POLLIN;
        which[np++] = k;
      }
    if (!exited && pidfd >= 0) {
      pf[np].fd = pidfd;
      pf[np].events = POLLIN;
      which[np++] = 2;
    }
    double wait = exited ? drain_until - now : deadline - now;
    if (!exited && pidfd < 0) {
      wait = TL_MIN(wait, slice);
      slice = TL_MIN(slice * 2, 0.02);
    }
    wait = TL_MAX(0.0, TL_MIN(wait, 3600.0));
    struct timespec ts;
    ts.tv_sec = (time_t)wait;
    ts.tv_nsec = (long)((wait - (double)ts.tv_sec) * 1e9);
    int n = ppoll(pf, (nfds_t)np, &ts, NULL);
    if (n < 0) {
      if (errno == EINTR) continue;
      rc = tl_err(ctx, TL_E_IO, "%s: poll: %s", who, strerror(errno));
      if (!exited) {
        kill(-pid, SIGKILL);
        exited = 1;
        t_end = tl_now();
      }
      break;
    }
    for (int j = 0; j < np; j++)
      if (which[j] < 2 && (pf[j].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL)))
        sink_read(&s[which[j]], tmp, tmpsize);
    /* a readable pidfd needs nothing: the next peek_exit sees the end */
  }
  close_fd(&s[0].fd);
  close_fd(&s[1].fd);
  close_fd(&pidfd);
  free(tmp);

  r->seconds = t_end - t0;
  if (lost)
    return tl_err(ctx, TL_E_CHILD,
                  "%s: lost child %d: reaped elsewhere (is SIGCHLD ignored?)", who, (int)pid);
  int st = 0;
  if (reap(pid, &st) != 0)
    return tl_err(ctx, TL_E_CHILD, "%s: waitpid(%d): %s", who, (int)pid, strerror(errno));
  if (rc != TL_OK) return rc;
  if (WIFSIGNALED(st)) {
    r->status = TL_PROC_SIGNAL;
    r->code = WTERMSIG(st);
  } else {
    r->code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r->status = r->code == 0 ? TL_PROC_OK : TL_PROC_EXIT;
  }
  if (timed_out) r->status = TL_PROC_TIMEOUT;
  return TL_OK;
}

/* ---- tl_proc_exec ------------------------------------------------------------- */

TL_EXPORT int tl_proc_exec(tl_ctx *ctx, const char *const *argv, double timeout_s,
                           size_t max_output, tl_proc_result **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_proc_exec: out is NULL");
  *out = NULL;
  if (!argv || !argv[0] || !argv[0][0])
    return tl_err(ctx, TL_E_ARG, "tl_proc_exec: argv is empty (expected a program name)");
  size_t limit = max_output ? max_output : PROC_DEFAULT_MAX;
  pthread_once(&fork_once, proc_once);

  posix_spawn_file_actions_t fa;
  posix_spawnattr_t at;
  sigset_t none, deflt;
  int po[2] = {-1, -1}, pe[2] = {-1, -1};
  pid_t pid = -1;

  pthread_mutex_lock(&fork_mu);
  if (make_pipe(po) != 0 || make_pipe(pe) != 0) {
    int e = errno;
    close_fd(&po[0]), close_fd(&po[1]), close_fd(&pe[0]), close_fd(&pe[1]);
    pthread_mutex_unlock(&fork_mu);
    return tl_err(ctx, TL_E_IO, "tl_proc_exec: cannot create pipes for '%s': %s", argv[0],
                  strerror(e));
  }
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, po[1], 1);
  posix_spawn_file_actions_adddup2(&fa, pe[1], 2);
  posix_spawnattr_init(&at);
  sigemptyset(&none);
  sigemptyset(&deflt);         /* dispositions a host commonly ignores */
  sigaddset(&deflt, SIGPIPE);
  sigaddset(&deflt, SIGXFSZ);
  posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                    POSIX_SPAWN_SETSIGDEF);
  posix_spawnattr_setpgroup(&at, 0);
  posix_spawnattr_setsigmask(&at, &none);
  posix_spawnattr_setsigdefault(&at, &deflt);

  double t0 = tl_now();
  /* glibc's posix_spawn returns only after the exec (vfork semantics), and
  ** reports exec failures (ENOENT, EACCES, ...) as its result. */
  int err = posix_spawnp(&pid, argv[0], &fa, &at, (char *const *)argv, environ);
  close_fd(&po[1]);
  close_fd(&pe[1]);
  pthread_mutex_unlock(&fork_mu);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&at);

  if (err != 0) {
    close_fd(&po[0]);
    close_fd(&pe[0]);
    if (err == EAGAIN)
      return tl_err(ctx, TL_E_IO, "tl_proc_exec: cannot start '%s': %s", argv[0], strerror(err));
    tl_proc_result *r = tl_calloc(1, sizeof *r);
    r->status = TL_PROC_SPAWN;
    r->code = err;
    r->seconds = tl_now() - t0;
    tl_buf_printf(&r->err, "tl_proc_exec: cannot run '%s': %s\n", argv[0], strerror(err));
    *out = r;
    return TL_OK;
  }

  tl_proc_result *r = tl_calloc(1, sizeof *r);
  int rc = supervise(ctx, "tl_proc_exec", pid, po[0], pe[0], t0, timeout_s, limit, r);
  if (rc != TL_OK) {
    tl_proc_result_free(r);
    return rc;
  }
  *out = r;
  return TL_OK;
}

/* ---- tl_proc_call ------------------------------------------------------------- */

/* The child side; never returns. Only the forking thread exists here. */
__attribute__((noreturn)) static void call_child(int (*fn)(void *, int), void *arg,
                                                 int po[2], int pe[2]) {
  setpgid(0, 0);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, NULL); /* e.g. forked from a pool worker */
  signal(SIGPIPE, SIG_IGN);
  /* The stdio buffers hold the parent's unwritten output: drop them, or the
  ** final flush below would emit them a second time. */
  __fpurge(stdout);
  __fpurge(stderr);
  close(po[0]);
  close(pe[0]);
  int devnull = open("/dev/null", O_RDONLY);
  if (devnull > 0) {
    dup2(devnull, 0);
    close(devnull);
  }
  dup2(pe[1], 1);
  dup2(pe[1], 2);
  close(pe[1]);
  int rc = fn(arg, po[1]);     /* po[1] stays close-on-exec */
  fflush(stdout);
  fflush(stderr);
  _exit(rc & 0xff);
}

int tl_proc_call(tl_ctx *ctx, int (*fn)(void *arg, int out_fd), void *arg,
                 double timeout_s, size_t max_output, tl_proc_result **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_proc_call: out is NULL");
  *out = NULL;
  if (!fn) return tl_err(ctx, TL_E_ARG, "tl_proc_call: fn is NULL");
  size_t limit = max_output ? max_output : PROC_DEFAULT_MAX;
  pthread_once(&fork_once, proc_once);

  int po[2] = {-1, -1}, pe[2] = {-1, -1};
  pthread_mutex_lock(&fork_mu);
  if (make_pipe(po) != 0 || make_pipe(pe) != 0) {
    int e = errno;
    close_fd(&po[0]), close_fd(&po[1]), close_fd(&pe[0]), close_fd(&pe[1]);
    pthread_mutex_unlock(&fork_mu);
    return tl_err(ctx, TL_E_IO, "tl_proc_call: cannot create pipes: %s", strerror(e));
  }
  double t0 = tl_now();
  pid_t pid = fork();
  if (pid == 0) call_child(fn, arg, po, pe);
  int e = errno;
  close_fd(&po[1]);
  close_fd(&pe[1]);
  pthread_mutex_unlock(&fork_mu);
  if (pid < 0) {
    close_fd(&po[0]);
    close_fd(&pe[0]);
    return tl_err(ctx, TL_E_IO, "tl_proc_call: fork: %s", strerror(e));
  }
  /* Also in the parent, so the group exists before any kill(-pid) below;
  ** EACCES (the child already exec'd, so it set it itself) is fine. */
  setpgid(pid, pid);

  tl_proc_result *r = tl_calloc(1, sizeof *r);
  int rc = supervise(ctx, "tl_proc_call", pid, po[0], pe[0], t0, timeout_s, limit, r);
  if (rc != TL_OK) {
    tl_proc_result_free(r);
    return rc;
  }
  *out = r;
  return TL_OK;
}

/* ---- results ------------------------------------------------------------------- */

TL_EXPORT int tl_proc_status(const tl_proc_result *r) { return r ? r->status : TL_PROC_SPAWN; }
TL_EXPORT int tl_proc_code(const tl_proc_result *r) { return r ? r->code : 0; }
TL_EXPORT double tl_proc_seconds(const tl_proc_result *r) { return r ? r->seconds : 0; }

static const char *buf_view(const tl_buf *b, size_t *len) {
  if (len) *len = b->n;
  return b->s ? b->s : "";
}

TL_EXPORT const char *tl_proc_stdout(const tl_proc_result *r, size_t *len) {
  if (!r) {
    if (len) *len = 0;
    return "";
  }
  return buf_view(&r->out, len);
}

TL_EXPORT const char *tl_proc_stderr(const tl_proc_result *r, size_t *len) {
  if (!r) {
    if (len) *len = 0;
    return "";
  }
  return buf_view(&r->err, len);
}

TL_EXPORT void tl_proc_result_free(tl_proc_result *r) {
  if (!r) return;
  tl_buf_free(&r->out);
  tl_buf_free(&r->err);
  free(r);
}
