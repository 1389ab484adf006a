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
**   - Nothing outlives the tuner: a tl_proc_call child gets SIGKILL when the
**     tuner dies (PR_SET_PDEATHSIG), and a tl_proc_exec program runs under a
**     keeper process that kills the program's whole group then (below).
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
#include <stdio.h>
#include <stdio_ext.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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

/* The child of tl_proc_exec is a keeper between us and the program:
**
**   tuner --fork--> keeper (leads the group; PR_SET_PDEATHSIG -> SIGTERM)
**                     `--fork+exec--> program (cc) --> its children (cc1, as, ...)
**
** A parent-death signal is not inherited by the program's own children, so the
** keeper stays: when the tuner dies however it dies (SIGKILL included), the
** keeper gets SIGTERM and kills its whole group, then itself. It otherwise waits
** for the program and ends the way the program ended (its exit status or its
** signal), so the supervision above sees the program's outcome. An exec failure
** travels back as an errno through a close-on-exec pipe (EOF: the exec worked).
** Between fork and exec only async-signal-safe calls are made. */

static void keeper_term(int sig) {
  (void)sig;
  kill(0, SIGKILL);            /* the group: the program, its children, the keeper */
}

static void report_errno(int fd, int e) {
  ssize_t w;
  do w = write(fd, &e, sizeof e);
  while (w < 0 && errno == EINTR);
}

__attribute__((noreturn)) static void keeper_main(const char *const *argv, char *const *envp,
                                                  pid_t parent, int po1, int pe1, int rp1) {
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &all, NULL);
  setpgid(0, 0);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = keeper_term;
  sigfillset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, NULL);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) kill(0, SIGKILL); /* the tuner died before the line above */

  int devnull = open("/dev/null", O_RDONLY);
  if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(po1, 1) < 0 || dup2(pe1, 2) < 0) {
    report_errno(rp1, errno);
    _exit(127);
  }
  if (rp1 != 3) {              /* keep 0..3 only: nothing of the tuner's leaks into the program */
    if (dup3(rp1, 3, O_CLOEXEC) < 0) {
      report_errno(rp1, errno);
      _exit(127);
    }
    rp1 = 3;
  }
#ifdef SYS_close_range
  syscall(SYS_close_range, 4u, ~0u, 0u);
#endif

  pid_t prog = fork();
  if (prog < 0) {
    report_errno(rp1, errno);
    _exit(127);
  }
  if (prog == 0) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    static const int reset[] = {SIGTERM, SIGPIPE, SIGXFSZ}; /* a host may ignore the last two */
    for (size_t i = 0; i < sizeof reset / sizeof reset[0]; i++) sigaction(reset[i], &dfl, NULL);
    sigprocmask(SIG_SETMASK, &none, NULL);
    if (envp) execvpe(argv[0], (char *const *)argv, envp);
    else execvp(argv[0], (char *const *)argv);
    report_errno(rp1, errno);
    _exit(127);
  }
  close(rp1);
  sigprocmask(SIG_SETMASK, &none, NULL);
  int st = 0;
  while (waitpid(prog, &st, 0) < 0)
    if (errno != EINTR) _exit(127);
  if (WIFSIGNALED(st)) {
    int sig = WTERMSIG(st);
    struct rlimit nocore = {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);
    signal(sig, SIG_DFL);
    raise(sig);
    _exit(128 + sig);
  }
  _exit(WIFEXITED(st) ? WEXITSTATUS(st) : 127);
}

/* This process's environment with the NAME=VALUE entries of set replacing or adding theirs,
** NULL-terminated, for execvpe (made before the fork: the child only reads it). */
static char **env_with(const char *const *set) {
  size_t n = 0, k = 0;
  while (environ && environ[n]) n++;
  while (set[k]) k++;
  char **e = tl_calloc(n + k + 1, sizeof *e);
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    const char *eq = strchr(environ[i], '=');
    size_t len = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
    int replaced = 0;
    for (size_t j = 0; j < k && !replaced; j++)
      replaced = strncmp(set[j], environ[i], len) == 0 && set[j][len] == '=';
    if (!replaced) e[o++] = environ[i];
  }
  for (size_t j = 0; j < k; j++) e[o++] = (char *)set[j];
  return e;
}

TL_EXPORT int tl_proc_exec(tl_ctx *ctx, const char *const *argv, double timeout_s,
                           size_t max_output, tl_proc_result **out) {
  return tl_proc_exec_env(ctx, argv, NULL, timeout_s, max_output, out);
}

int tl_proc_exec_env(tl_ctx *ctx, const char *const *argv, const char *const *env_set, double timeout_s,
                     size_t max_output, tl_proc_result **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_proc_exec: out is NULL");
  *out = NULL;
  if (!argv || !argv[0] || !argv[0][0])
    return tl_err(ctx, TL_E_ARG, "tl_proc_exec: argv is empty (expected a program name)");
  size_t limit = max_output ? max_output : PROC_DEFAULT_MAX;
  pthread_once(&fork_once, proc_once);
  char **envp = env_set ? env_with(env_set) : NULL;

  int po[2] = {-1, -1}, pe[2] = {-1, -1}, rp[2] = {-1, -1};
  pid_t parent = getpid();

  pthread_mutex_lock(&fork_mu);
  if (make_pipe(po) != 0 || make_pipe(pe) != 0 || make_pipe(rp) != 0) {
    int e = errno;
    close_fd(&po[0]), close_fd(&po[1]), close_fd(&pe[0]), close_fd(&pe[1]);
    close_fd(&rp[0]), close_fd(&rp[1]);
    pthread_mutex_unlock(&fork_mu);
    free(envp);
    return tl_err(ctx, TL_E_IO, "tl_proc_exec: cannot create pipes for '%s': %s", argv[0],
                  strerror(e));
  }
  double t0 = tl_now();
  pid_t pid = fork();
  if (pid == 0) keeper_main(argv, envp, parent, po[1], pe[1], rp[1]);
  free(envp);                  /* the array only: its strings are environ's and the caller's */
  int fe = errno;
  close_fd(&po[1]);
  close_fd(&pe[1]);
  close_fd(&rp[1]);
  pthread_mutex_unlock(&fork_mu);
  if (pid < 0) {
    close_fd(&po[0]), close_fd(&pe[0]), close_fd(&rp[0]);
    return tl_err(ctx, TL_E_IO, "tl_proc_exec: cannot start '%s': %s", argv[0], strerror(fe));
  }
  setpgid(pid, pid);           /* as the keeper does, so kill(-pid) below always has a group */

  /* Wait for the exec: EOF when it worked, an errno when it did not. */
  int err = 0;
  size_t got = 0;
  while (got < sizeof err) {
    ssize_t n = read(rp[0], (char *)&err + got, sizeof err - got);
    if (n > 0) got += (size_t)n;
    else if (n == 0 || errno != EINTR) break;
  }
  close_fd(&rp[0]);
  if (got != sizeof err) err = 0;

  if (err != 0) {
    int st;
    kill(-pid, SIGKILL);
    reap(pid, &st);
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
                                                 int po[2], int pe[2], pid_t parent) {
  setpgid(0, 0);
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* dies with the tuner, however the tuner dies */
  if (getppid() != parent) _exit(127);
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

struct tl_proc_child {
  pid_t pid;
  int fd_out, fd_err;          /* read ends; -1 once at EOF */
  double t0;                   /* when it was forked */
  int pidfd;                   /* tl_proc_wait_any's, opened on first use; -1 none */
  tl_buf out, err;             /* what tl_proc_wait_any drained before the wait */
};

int tl_proc_start(tl_ctx *ctx, int (*fn)(void *arg, int out_fd), void *arg, tl_proc_child **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_proc_start: out is NULL");
  *out = NULL;
  if (!fn) return tl_err(ctx, TL_E_ARG, "tl_proc_start: fn is NULL");
  pthread_once(&fork_once, proc_once);

  /* Allocated before the fork: nothing between the fork and the return
  ** allocates, so this thread's allocations are never split around it. */
  tl_proc_child *c = tl_calloc(1, sizeof *c);
  int po[2] = {-1, -1}, pe[2] = {-1, -1};
  pthread_mutex_lock(&fork_mu);
  if (make_pipe(po) != 0 || make_pipe(pe) != 0) {
    int e = errno;
    close_fd(&po[0]), close_fd(&po[1]), close_fd(&pe[0]), close_fd(&pe[1]);
    pthread_mutex_unlock(&fork_mu);
    free(c);
    return tl_err(ctx, TL_E_IO, "tl_proc_start: cannot create pipes: %s", strerror(e));
  }
  c->t0 = tl_now();
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) call_child(fn, arg, po, pe, parent);
  int e = errno;
  close_fd(&po[1]);
  close_fd(&pe[1]);
  pthread_mutex_unlock(&fork_mu);
  if (pid < 0) {
    close_fd(&po[0]);
    close_fd(&pe[0]);
    free(c);
    return tl_err(ctx, TL_E_IO, "tl_proc_start: fork: %s", strerror(e));
  }
  /* Also in the parent, so the group exists before any kill(-pid) below;
  ** EACCES (the child already exec'd, so it set it itself) is fine. */
  setpgid(pid, pid);
  c->pid = pid;
  c->fd_out = po[0];
  c->fd_err = pe[0];
  c->pidfd = -2;               /* not opened yet */
  *out = c;
  return TL_OK;
}

int tl_proc_wait_any(tl_ctx *ctx, tl_proc_child *const *cs, int n, const double *deadlines,
                     size_t max_output, double max_wait_s, int *ready) {
  if (!ready || (n > 0 && !cs)) return tl_err(ctx, TL_E_ARG, "tl_proc_wait_any: NULL argument");
  *ready = -1;
  size_t limit = max_output ? max_output : PROC_DEFAULT_MAX;
  double until = tl_now() + (max_wait_s > 0 ? max_wait_s : 0);
  double slice = 1e-4;         /* polling period while some child has no pidfd */
  char tmp[4096];
  for (;;) {
    double now = tl_now(), wake = until;
    int any = 0, no_pidfd = 0;
    for (int i = 0; i < n; i++) {
      tl_proc_child *c = cs[i];
      if (!c) continue;
      any = 1;
      if (peek_exit(c->pid) != 0 || (deadlines && deadlines[i] > 0 && now >= deadlines[i])) {
        *ready = i;            /* ended (or lost: tl_proc_wait reports it), or out of time */
        return TL_OK;
      }
      if (deadlines && deadlines[i] > 0) wake = TL_MIN(wake, deadlines[i]);
      if (c->pidfd == -2) c->pidfd = open_pidfd(c->pid);
      if (c->pidfd < 0) no_pidfd = 1;
    }
    if (!any || now >= until) return TL_OK;
    struct pollfd pf[3 * 64];
    tl_proc_child *owner[3 * 64];
    int which[3 * 64], np = 0;
    for (int i = 0; i < n && np + 3 <= (int)TL_ARRAY_SIZE(pf); i++) {
      tl_proc_child *c = cs[i];
      if (!c) continue;
      int fds[3] = {c->fd_out, c->fd_err, c->pidfd};
      for (int k = 0; k < 3; k++)
        if (fds[k] >= 0) {
          pf[np].fd = fds[k];
          pf[np].events = POLLIN;
          owner[np] = c;
          which[np++] = k;
        }
    }
    double wait = TL_MAX(0.0, TL_MIN(wake - now, 3600.0));
    if (no_pidfd || n > 64) {
      wait = TL_MIN(wait, slice);
      slice = TL_MIN(slice * 2, 0.02);
    }
    struct timespec ts;
    ts.tv_sec = (time_t)wait;
    ts.tv_nsec = (long)((wait - (double)ts.tv_sec) * 1e9);
    int got = ppoll(pf, (nfds_t)np, &ts, NULL);
    if (got < 0) {
      if (errno == EINTR) continue;
      return tl_err(ctx, TL_E_IO, "tl_proc_wait_any: poll: %s", strerror(errno));
    }
    /* drain what the children wrote, so none blocks on a full pipe while it waits */
    for (int j = 0; j < np; j++) {
      if (which[j] == 2 || !(pf[j].revents & (POLLIN | POLLHUP | POLLERR | POLLNVAL))) continue;
      tl_proc_child *c = owner[j];
      sink s = {which[j] == 0 ? c->fd_out : c->fd_err, which[j] == 0 ? &c->out : &c->err, limit};
      sink_read(&s, tmp, sizeof tmp);
      if (which[j] == 0) c->fd_out = s.fd;
      else c->fd_err = s.fd;
    }
  }
}

int tl_proc_wait(tl_ctx *ctx, tl_proc_child *c, double timeout_s, size_t max_output,
                 tl_proc_result **out) {
  if (!c) return tl_err(ctx, TL_E_ARG, "tl_proc_wait: no child");
  if (out) *out = NULL;
  size_t limit = max_output ? max_output : PROC_DEFAULT_MAX;
  tl_proc_result *r = tl_calloc(1, sizeof *r);
  r->out = c->out;             /* what tl_proc_wait_any drained already */
  r->err = c->err;
  if (c->pidfd >= 0) close(c->pidfd);
  /* The limit counts from now: a child that waited for its pipes to be read
  ** is not charged for the wait. Its seconds count from the fork. */
  double now = tl_now();
  int rc = supervise(ctx, "tl_proc_call", c->pid, c->fd_out, c->fd_err, now, timeout_s, limit, r);
  r->seconds += now - c->t0;
  free(c);
  if (rc != TL_OK || !out) {
    tl_proc_result_free(r);
    return rc != TL_OK ? rc : tl_err(ctx, TL_E_ARG, "tl_proc_wait: out is NULL");
  }
  *out = r;
  return TL_OK;
}

int tl_proc_call(tl_ctx *ctx, int (*fn)(void *arg, int out_fd), void *arg,
                 double timeout_s, size_t max_output, tl_proc_result **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_proc_call: out is NULL");
  *out = NULL;
  tl_proc_child *c = NULL;
  int rc = tl_proc_start(ctx, fn, arg, &c);
  if (rc != TL_OK) return rc;
  return tl_proc_wait(ctx, c, timeout_s, max_output, out);
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
