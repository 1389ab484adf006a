/*
** Unit tests for core/base/proc.c: output capture, exit codes and signals,
** a missing program, timeouts that kill the whole process group, large
** outputs, tl_proc_call's data channel and crashes, and concurrent calls
** (no descriptor leaks between them, no zombies left behind).
**
** Functions run in a child through tl_proc_call must not use CHECK (it would
** longjmp into the runner inside the child): they report through their exit
** status and output.
*/
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/base.h"
#include "tl_test.h"

/* ---- helpers ------------------------------------------------------------------ */

static tl_proc_result *run(const char *const *argv, double timeout_s, size_t max_output) {
  tl_ctx *ctx = tl_ctx_new();
  tl_proc_result *r = NULL;
  int rc = tl_proc_exec(ctx, argv, timeout_s, max_output, &r);
  CHECK_MSG(rc == TL_OK, "tl_proc_exec(%s): %s", argv[0], tl_errmsg(ctx));
  CHECK(r != NULL);
  tl_ctx_free(ctx);
  return r;
}

static tl_proc_result *call(int (*fn)(void *, int), void *arg, double timeout_s,
                            size_t max_output) {
  tl_ctx *ctx = tl_ctx_new();
  tl_proc_result *r = NULL;
  int rc = tl_proc_call(ctx, fn, arg, timeout_s, max_output, &r);
  CHECK_MSG(rc == TL_OK, "tl_proc_call: %s", tl_errmsg(ctx));
  CHECK(r != NULL);
  tl_ctx_free(ctx);
  return r;
}

/* A process is gone once kill(pid, 0) says so, or it is a zombie waiting for
** a reaper (in a container, pid 1 may never reap). Waits up to a second. */
static int pid_gone(pid_t pid) {
  for (int k = 0; k < 200; k++) {
    if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (f) {
      size_t n = fread(buf, 1, sizeof buf - 1, f);
      fclose(f);
      buf[n] = 0;
      const char *p = strrchr(buf, ')');
      if (p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X')) return 1;
    }
    usleep(5000);
  }
  return 0;
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  while (readdir(d)) n++;
  closedir(d);
  return n;
}

/* ---- tl_proc_exec ---------------------------------------------------------------- */

TL_TEST(proc_exec_echo) {
  const char *argv[] = {"echo", "hello", "world", NULL};
  tl_proc_result *r = run(argv, 5, 0);
  size_t n;
  CHECK_EQ_INT(tl_proc_status(r), TL_PROC_OK);
  CHECK_EQ_INT(tl_proc_code(r), 0);
  CHECK_STREQ(tl_proc_stdout(r, &n), "hello world\n");
  CHECK_EQ_INT(n, 12);
  CHECK_STREQ(tl_proc_stderr(r, &n), "");
  CHECK_EQ_INT(n, 0);
  CHECK(tl_proc_seconds(r) >= 0 && tl_proc_seconds(r) < 5);
  tl_proc_result_free(r);
}

TL_TEST(proc_exec_exit_code) {
  const char *argv[] = {"sh", "-c", "echo out; echo err >&2; exit 3", NULL};
  tl_proc_result *r = run(argv, 5, 0);
  CHECK_EQ_INT(tl_proc_status(r), TL_PROC_EXIT);
  CHECK_EQ_INT(tl_proc_code(r), 3);
  CHECK_STREQ(tl_proc_stdout(r, NULL), "out\n");
  CHECK_STREQ(tl_proc_stderr(r, NULL), "err\n");
  tl_proc_result_free(r);
}

TL_TEST(proc_exec_signal) {
  const char *argv[] = {"sh", "-c", "kill -SEGV $$", NULL};
  tl_proc_result *r = run(argv, 5, 0);
  CHECK_EQ_INT(tl_proc_status(r), TL_PROC_SIGNAL);
  CHECK_EQ_INT(tl_proc_code(r), SIGSEGV);
  tl_proc_result_free(r);
}

TL_TEST(proc_exec_stdin_is_devnull) {
  const char *argv[] = {"cat", NULL};  /* would block forever on a terminal */
  tl_proc_result *r = run(argv, 5, 0);
  CHECK_EQ_INT(tl_proc_status(r), TL_PROC_OK);
  CHECK_STREQ(tl_proc_stdout(r, NULL), "");
  tl_proc_result_free(r);
}

TL_TEST(proc_exec_missing_program) {
  const char *names[] = {"tl-no-such-program-xyz", "/nonexistent/dir/tl-prog"};
  for (size_t k = 0; k < TL_ARRAY_SIZE(names); k++) {
    const char *argv[] = {names[k], "arg", NULL};
    tl_proc_result *r = run(argv, 5, 0);
    CHECK_EQ_INT(tl_proc_status(r), TL_PROC_SPAWN);
    CHECK_EQ_INT(tl_proc_code(r), ENOENT);
    const char *err = tl_proc_stderr(r, NULL);
    CHECK_MSG(strstr(err, names[k]) != NULL, "message does not name the program: %s", err);
    tl_proc_result_free(r);
  }
}

TL_TEST(proc_exec_bad_args) {
  tl_ctx *ctx = tl_ctx_new();
  tl_proc_result *r = (tl_proc_result *)1;
  CHECK_EQ_INT(tl_proc_exec(ctx, NULL, 1, 0, &r), TL_E_ARG);
  CHECK(r == NULL);
  CHECK(strlen(tl_errmsg(ctx)) > 0);
  const char *empty[] = {NULL};
  CHECK_EQ_INT(tl_proc_exec(ctx, empty, 1, 0, &r), TL_E_ARG);
  const char *argv[] = {"true", NULL};
  CHECK_EQ_INT(tl_proc_exec(ctx, argv, 1, 0, NULL), TL_E_ARG);
  CHECK_EQ_INT(tl_proc_call(ctx, NULL, NULL, 1, 0, &r), TL_E_ARG);
  /* accessors tolerate NULL */
  size_t n = 99;
  CHECK_STREQ(tl_proc_stdout(NULL, &n), "");
  CHECK_EQ_INT(n, 0);
  tl_proc_result_free(NULL);
  tl_ctx_free(ctx);
}

TL_TEST(proc_exec_timeout) {
  const char *argv[] = {"sleep", "30", NULL};
  double t0 = tl_now();
  tl_proc_result *r = run(argv, 0.2, 0);
  double wall = tl_now() - t0;
  CHECK_EQ_INT(tl_proc_status(r), TL_PROC_TIMEOUT);
  CHECK_EQ_INT(tl_proc_code(r), SIGKILL);
  CHECK(tl_proc_seconds(r) >= 0.19);
  CHECK_MSG(wall < 10, "timed-out call took %.3f s (the program sleeps 30 s)", wall);
  tl_proc_result_free(r);
}

/* The grandchild `sleep 30 &` is in the child's group and dies with it. (The
** timeout leaves the shell time to print the grandchild's pid even on a
** loaded or sanitized run.) */
TL_TEST(proc_exec_timeout_kills_group) {
  const char *argv[] = {"sh", "-c", "sleep 30 & echo $!; sleep 30", NULL};
  double t0 = tl_now();
  tl_proc_result *r = run(argv, 2.0, 0);
  double wall = tl_now() - t0;
  CHECK_EQ_INT(tl_proc_status(r), TL_PROC_TIMEOUT);
  CHECK_MSG(wall < 10, "timed-out group took %.3f s (its programs sleep 30 s)", wall);
  int pid = atoi(tl_proc_stdout(r, NULL));
  CHECK_MSG(pid > 1, "no grandchild pid in '%s'", tl_proc_stdout(r, NULL));
  CHECK_MSG(pid_gone(pid), "grandchild %d survived the timeout", pid);
  tl_proc_result_free(r);
}

/* A background job left behind by a child that exits is killed too, and
** does not hold the call up although it keeps stdout open. */
TL_TEST(proc_exec_leftovers_killed) {
  const char *argv[] = {"sh", "-c", "sleep 30 & echo $!", NULL};
  double t0 = tl_now();
  tl_proc_result *r = run(argv, 10, 0);
  double wall = tl_now() - t0;
  CHECK_EQ_INT(tl_proc_status(r), TL_PROC_OK);
  CHECK_MSG(wall < 10, "call waited %.3f s for a leftover (it sleeps 30 s)", wall);
  int pid = atoi(tl_proc_stdout(r, NULL));
  CHECK(pid > 1);
  CHECK_MSG(pid_gone(pid), "leftover %d survived", pid);
  tl_proc_result_free(r);
}

static int all_bytes(const char *s, size_t n, char c) {
  for (size_t i = 0; i < n; i++)
    if (s[i] != c) return 0;
  return 1;
}

TL_TEST(proc_exec_large_output) {
  const char *argv[] = {"sh", "-c",
                        "head -c 10000000 /dev/zero; head -c 10000000 /dev/zero >&2; "
                        "echo done >&2",
                        NULL};
  size_t limits[] = {0, 100, 3 << 20};
  for (size_t k = 0; k < TL_ARRAY_SIZE(limits); k++) {
    double t0 = tl_now();
    tl_proc_result *r = run(argv, 10, limits[k]);
    size_t want = limits[k] ? limits[k] : (size_t)1 << 20, no, ne;
    const char *o = tl_proc_stdout(r, &no), *e = tl_proc_stderr(r, &ne);
    CHECK_EQ_INT(tl_proc_status(r), TL_PROC_OK);
    CHECK_EQ_INT(no, want);
    CHECK_EQ_INT(ne, want);
    CHECK(all_bytes(o, no, 0) && all_bytes(e, ne, 0));
    CHECK(tl_now() - t0 < 5);
    tl_proc_result_free(r);
  }
}

/* ---- tl_proc_call ----------------------------------------------------------------- */

static int write_all(int fd, const void *p, size_t n) {
  const char *s = p;
  while (n > 0) {
    ssize_t w = write(fd, s, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    s += w;
    n -= (size_t)w;
  }
  return 0;
}

static const char payload[] = "result:42\0binary\xff";

static int fn_bytes(void *arg, int out_fd) {
  printf("a diagnostic on stdout\n"); /* stdio: flushed by the child's exit path */
  fprintf(stderr, "a diagnostic on stderr\n");
  if (write_all(out_fd, payload, sizeof payload) != 0) return 99;
  return *(int *)arg;
}

TL_TEST(proc_call_bytes) {
  /* Unflushed parent output must not be replayed by the child. */
  printf("     (parent output before the fork) ");
  int code = 0;
  tl_proc_result *r = call(fn_bytes, &code, 5, 0);
  printf("\n");
  size_t n;
  const char *out = tl_proc_stdout(r, &n);
  CHECK_EQ_INT(tl_proc_status(r), TL_PROC_OK);
  CHECK_EQ_INT(n, sizeof payload);
  CHECK(memcmp(out, payload, sizeof payload) == 0);
  const char *err = tl_proc_stderr(r, NULL);
  CHECK(strstr(err, "a diagnostic on stdout\n") != NULL);
  CHECK(strstr(err, "a diagnostic on stderr\n") != NULL);
  CHECK(strstr(err, "parent output") == NULL);
  tl_proc_result_free(r);

  code = 7;
  r = call(fn_bytes, &code, 5, 0);
  CHECK_EQ_INT(tl_proc_status(r), TL_PROC_EXIT);
  CHECK_EQ_INT(tl_proc_code(r), 7);
  tl_proc_result_free(r);
}

static int fn_segv(void *arg, int out_fd) {
  (void)arg;
  write_all(out_fd, "before", 6);
  signal(SIGSEGV, SIG_DFL);          /* a sanitizer's handler would turn it into exit(1) */
  raise(SIGSEGV);
  return 0;
}

static int fn_abort(void *arg, int out_fd) {
  (void)arg, (void)out_fd;
  abort();
}

TL_TEST(proc_call_crash) {
  tl_proc_result *r = call(fn_segv, NULL, 5, 0);
  CHECK_EQ_INT(tl_proc_status(r), TL_PROC_SIGNAL);
  CHECK_EQ_INT(tl_proc_code(r), SIGSEGV);
  CHECK_STREQ(tl_proc_stdout(r, NULL), "before"); /* written before the crash: kept */
  tl_proc_result_free(r);

  r = call(fn_abort, NULL, 5, 0);
  CHECK_EQ_INT(tl_proc_status(r), TL_PROC_SIGNAL);
  CHECK_EQ_INT(tl_proc_code(r), SIGABRT);
  tl_proc_result_free(r);
}

static int fn_loop(void *arg, int out_fd) {
  (void)arg, (void)out_fd;
  volatile unsigned long k = 0;
  for (;;) k++;
  return 0;
}

TL_TEST(proc_call_timeout) {
  double t0 = tl_now();
  tl_proc_result *r = call(fn_loop, NULL, 0.2, 0);
  double wall = tl_now() - t0;
  CHECK_EQ_INT(tl_proc_status(r), TL_PROC_TIMEOUT);
  CHECK_MSG(wall < 10, "timed-out call took %.3f s (the function never returns)", wall);
  CHECK(tl_proc_seconds(r) >= 0.19);
  tl_proc_result_free(r);
}

/* 5 MB to each of out_fd and stderr, interleaved: no deadlock, truncation. */
static int fn_flood(void *arg, int out_fd) {
  (void)arg;
  static char a[65536], b[65536];
  memset(a, 'a', sizeof a);
  memset(b, 'b', sizeof b);
  for (int i = 0; i < 80; i++) {
    if (write_all(out_fd, a, sizeof a) != 0) return 2;
    if (write_all(2, b, sizeof b) != 0) return 3;
  }
  return 0;
}

TL_TEST(proc_call_large_output) {
  tl_proc_result *r = call(fn_flood, NULL, 10, 0);
  size_t no, ne;
  const char *o = tl_proc_stdout(r, &no), *e = tl_proc_stderr(r, &ne);
  CHECK_EQ_INT(tl_proc_status(r), TL_PROC_OK);
  CHECK_EQ_INT(no, 1 << 20);
  CHECK_EQ_INT(ne, 1 << 20);
  CHECK(all_bytes(o, no, 'a') && all_bytes(e, ne, 'b'));
  tl_proc_result_free(r);
}

/* Several children started from one thread, then waited for in order: each
** floods its pipes (so the later ones block until their wait drains them),
** one loops and is timed out by its own wait, and every result is its own. */
TL_TEST(proc_start_wait) {
  enum { N = 4 };
  tl_ctx *ctx = tl_ctx_new();
  tl_proc_child *c[N] = {0};
  for (int i = 0; i < N; i++)
    CHECK_MSG(tl_proc_start(ctx, i == 2 ? fn_loop : fn_flood, NULL, &c[i]) == TL_OK,
              "tl_proc_start: %s", tl_errmsg(ctx));
  for (int i = 0; i < N; i++) {
    tl_proc_result *r = NULL;
    CHECK_MSG(tl_proc_wait(ctx, c[i], i == 2 ? 0.3 : 10, 0, &r) == TL_OK, "tl_proc_wait: %s",
              tl_errmsg(ctx));
    size_t no, ne;
    const char *o = tl_proc_stdout(r, &no), *e = tl_proc_stderr(r, &ne);
    if (i == 2) {
      CHECK_EQ_INT(tl_proc_status(r), TL_PROC_TIMEOUT);
      CHECK(tl_proc_seconds(r) >= 0.29);
    } else {
      CHECK_EQ_INT(tl_proc_status(r), TL_PROC_OK);
      CHECK_EQ_INT(no, 1 << 20);
      CHECK_EQ_INT(ne, 1 << 20);
      CHECK(all_bytes(o, no, 'a') && all_bytes(e, ne, 'b'));
    }
    tl_proc_result_free(r);
  }
  tl_proc_result *r = NULL;
  CHECK(tl_proc_wait(ctx, NULL, 1, 0, &r) == TL_E_ARG && r == NULL);
  CHECK(tl_proc_start(ctx, NULL, NULL, &c[0]) == TL_E_ARG && c[0] == NULL);
  tl_ctx_free(ctx);
}

/* ---- concurrency, descriptors, zombies ----------------------------------------------- */

typedef struct {
  int id, ok, calls;
  atomic_int *stop;
} worker_arg;

static int fn_echo_id(void *arg, int out_fd) {
  char buf[32];
  int n = snprintf(buf, sizeof buf, "call-%d", *(int *)arg);
  return write_all(out_fd, buf, (size_t)n) ? 1 : 0;
}

/* Quick calls, alternating exec and call, until told to stop. */
static void *proc_worker(void *arg) {
  worker_arg *w = arg;
  tl_ctx *ctx = tl_ctx_new();
  w->ok = 1;
  for (int i = 0; i < 20 || !atomic_load(w->stop); i++) {
    char want[64], word[32];
    tl_proc_result *r = NULL;
    int tag = w->id * 100000 + i;
    if (i % 2 == 0) {
      snprintf(word, sizeof word, "exec-%d", tag);
      const char *argv[] = {"echo", word, NULL};
      snprintf(want, sizeof want, "exec-%d\n", tag);
      if (tl_proc_exec(ctx, argv, 5, 0, &r) != TL_OK) w->ok = 0;
    } else {
      snprintf(want, sizeof want, "call-%d", tag);
      if (tl_proc_call(ctx, fn_echo_id, &tag, 5, 0, &r) != TL_OK) w->ok = 0;
    }
    if (!r || tl_proc_status(r) != TL_PROC_OK || strcmp(tl_proc_stdout(r, NULL), want) != 0)
      w->ok = 0;
    tl_proc_result_free(r);
    w->calls++;
  }
  tl_ctx_free(ctx);
  return NULL;
}

/* A slow child that reports the write ends of pipes it holds besides its own
** output (fds 0-2 and out_fd): a quick call's pipe leaked into it would keep
** that call waiting for this child's end. */
static int pipe_write_end(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode)) return 0;
  int fl = fcntl(fd, F_GETFL);
  return fl >= 0 && (fl & O_ACCMODE) != O_RDONLY;
}
static unsigned char inherited_writers[1024];   /* open before the test (the runner's) */

static int fn_nap(void *arg, int out_fd) {
  (void)arg;
  int leaks = 0;
  for (int fd = 3; fd < 1024; fd++)
    if (fd != out_fd && !inherited_writers[fd] && pipe_write_end(fd)) leaks++;
  char msg[32];
  int n = snprintf(msg, sizeof msg, "leaks=%d", leaks);
  if (write(out_fd, msg, (size_t)n) != n) return 1;
  usleep(250000);
  return 0;
}

typedef struct {
  int ok;
  atomic_int *stop;
} napper_arg;

static void *napper(void *arg) {
  napper_arg *a = arg;
  tl_ctx *ctx = tl_ctx_new();
  a->ok = 1;
  for (int i = 0; i < 4; i++) {
    tl_proc_result *r = NULL;
    if (tl_proc_call(ctx, fn_nap, NULL, 5, 0, &r) != TL_OK || tl_proc_status(r) != TL_PROC_OK)
      a->ok = 0;
    size_t n = 0;
    const char *o = r ? tl_proc_stdout(r, &n) : "";
    if (n != 7 || memcmp(o, "leaks=0", 7) != 0) a->ok = 0;
    tl_proc_result_free(r);
  }
  atomic_store(a->stop, 1);
  tl_ctx_free(ctx);
  return NULL;
}

/* Two threads making quick calls while a third keeps forking slow children:
** a quick call's pipe must never leak into a slow child (each slow child
** counts the pipe write ends it holds; a leak would make the call wait for
** that child's end), outputs never mix, nothing is left open, no child is
** left unreaped. */
TL_TEST(proc_concurrent) {
  int fds0 = count_fds();
  for (int fd = 3; fd < 1024; fd++) inherited_writers[fd] = (unsigned char)pipe_write_end(fd);
  atomic_int stop;
  atomic_init(&stop, 0);
  napper_arg na = {0, &stop};
  pthread_t nap, th[2];
  worker_arg w[2] = {{1, 0, 0, &stop}, {2, 0, 0, &stop}};
  CHECK(pthread_create(&nap, NULL, napper, &na) == 0);
  for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, proc_worker, &w[i]) == 0);
  pthread_join(nap, NULL);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  CHECK(na.ok);
  for (int i = 0; i < 2; i++) {
    CHECK_MSG(w[i].ok, "thread %d saw a wrong result", i);
    CHECK_MSG(w[i].calls >= 20, "thread %d made %d calls", i, w[i].calls);
  }
  CHECK_EQ_INT(count_fds(), fds0);
  int st;
  CHECK_MSG(waitpid(-1, &st, WNOHANG) <= 0, "a child was left unreaped");
}
