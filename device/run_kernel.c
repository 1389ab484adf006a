/*
** run_kernel.c -- tunelua-kernel-run: run one compiled kernel (a shared
** object of the C backend) on tensors read from files, and write its outputs.
** Plain C with libc and libdl only, so it builds for any device the C
** backend targets (cross compiled for aarch64 by the build, run under
** qemu-aarch64 in the tests):
**
**   tunelua-kernel-run KERNEL.so FNAME ARG... [-n NUMBER -r REPEAT]
**   ARG: in:PATH:DTYPE:SHAPE | out:PATH:DTYPE:SHAPE   (SHAPE = 1x8x8x8, DTYPE = float32 ...)
**
** Inputs are raw little-endian element data (exactly the shape's bytes);
** outputs are written the same way. With -n/-r the kernel is also timed as
** the time evaluator does it (one warm-up call; REPEAT repeats of NUMBER
** calls) and the mean seconds per call of each repeat are printed, one per
** line. Exit status: 0, 1 on bad usage or input, 2 when the kernel fails
** (its NAME_error message printed).
*/
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* DLPack's DLTensor layout (what the kernels read). */
typedef struct { int32_t device_type, device_id; } dl_device;
typedef struct { uint8_t code, bits; uint16_t lanes; } dl_dtype;
typedef struct {
  void *data;
  dl_device device;
  int32_t ndim;
  dl_dtype dtype;
  int64_t *shape, *strides;
  uint64_t byte_offset;
} dl_tensor;

#define MAX_ARGS 64
#define MAX_DIMS 16

typedef struct {
  int out;
  const char *path;
  dl_tensor t;
  int64_t shape[MAX_DIMS];
  size_t bytes;
} arg_t;

static int die(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "tunelua-kernel-run: ");
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
  return 1;
}

static int parse_dtype(const char *s, dl_dtype *d) {
  static const struct { const char *name; uint8_t code, bits; } types[] = {
      {"float32", 2, 32}, {"float64", 2, 64}, {"float16", 2, 16}, {"int8", 0, 8},
      {"int16", 0, 16},   {"int32", 0, 32},   {"int64", 0, 64},   {"uint8", 1, 8},
      {"bool", 1, 1}};
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    if (strcmp(s, types[i].name) == 0) {
      d->code = types[i].code, d->bits = types[i].bits, d->lanes = 1;
      return 0;
    }
  return -1;
}

/* "in:PATH:DTYPE:SHAPE" */
static int parse_arg(char *s, arg_t *a) {
  char *kind = strtok(s, ":"), *path = strtok(NULL, ":"), *dt = strtok(NULL, ":"),
       *shape = strtok(NULL, ":");
  if (!kind || !path || !dt || !shape || (strcmp(kind, "in") && strcmp(kind, "out")))
    return die("bad argument '%s' (expected in:PATH:DTYPE:SHAPE or out:PATH:DTYPE:SHAPE)%s", s, "");
  a->out = strcmp(kind, "out") == 0;
  a->path = path;
  if (parse_dtype(dt, &a->t.dtype)) return die("unknown dtype '%s'%s", dt, "");
  int n = 0;
  size_t elems = 1;
  for (char *p = shape; *p;) {
    char *end;
    long long v = strtoll(p, &end, 10);
    if (end == p || v < 0 || n >= MAX_DIMS) return die("bad shape '%s'%s", shape, "");
    a->shape[n++] = v;
    elems *= (size_t)v;
    p = *end == 'x' ? end + 1 : end;
    if (*end && *end != 'x') return die("bad shape '%s'%s", shape, "");
  }
  a->t.ndim = n;
  a->t.shape = a->shape;
  a->t.strides = NULL;
  a->t.device.device_type = 1;   /* kDLCPU */
  a->bytes = elems * (a->t.dtype.bits == 1 ? 1 : a->t.dtype.bits / 8);
  a->t.data = aligned_alloc(64, (a->bytes + 63) & ~(size_t)63 ? (a->bytes + 63) & ~(size_t)63 : 64);
  if (!a->t.data) return die("out of memory for '%s'%s", path, "");
  memset(a->t.data, 0, a->bytes);
  if (!a->out) {
    FILE *f = fopen(path, "rb");
    if (!f) return die("cannot open '%s': %s", path, strerror(errno));
    size_t got = fread(a->t.data, 1, a->bytes, f);
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (got != a->bytes || extra) return die("'%s' does not hold exactly the shape's bytes (%s)", path, shape);
  }
  return 0;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: tunelua-kernel-run KERNEL.so FNAME in:PATH:DTYPE:SHAPE... "
                    "out:PATH:DTYPE:SHAPE... [-n NUMBER -r REPEAT]\n");
    return 1;
  }
  static arg_t args[MAX_ARGS];
  void *ptrs[MAX_ARGS];
  int nargs = 0, number = 0, repeat = 0;
  for (int i = 3; i < argc; i++) {
    if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) { number = atoi(argv[++i]); continue; }
    if (strcmp(argv[i], "-r") == 0 && i + 1 < argc) { repeat = atoi(argv[++i]); continue; }
    if (nargs >= MAX_ARGS) return die("more than %s arguments%s", "64", "");
    if (parse_arg(argv[i], &args[nargs])) return 1;
    ptrs[nargs] = &args[nargs].t;
    nargs++;
  }
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) return die("cannot load '%s': %s", argv[1], dlerror());
  int32_t (*fn)(void **, int32_t);
  const char *(*efn)(void);
  *(void **)&fn = dlsym(h, argv[2]);
  if (!fn) return die("'%s' has no function '%s'", argv[1], argv[2]);
  char ename[256];
  snprintf(ename, sizeof ename, "%s_error", argv[2]);
  *(void **)&efn = dlsym(h, ename);
  int32_t rc = fn(ptrs, nargs);
  if (rc) {
    fprintf(stderr, "tunelua-kernel-run: %s failed (code %d): %s\n", argv[2], (int)rc,
            efn ? efn() : "no message");
    return 2;
  }
  for (int r = 0; r < repeat && number > 0; r++) {
    double t0 = now();
    for (int k = 0; k < number; k++) fn(ptrs, nargs);
    printf("%.9g\n", (now() - t0) / number);
  }
  for (int i = 0; i < nargs; i++) {
    if (!args[i].out) continue;
    FILE *f = fopen(args[i].path, "wb");
    if (!f || fwrite(args[i].t.data, 1, args[i].bytes, f) != args[i].bytes || fclose(f) != 0)
      return die("cannot write '%s': %s", args[i].path, strerror(errno));
  }
  return 0;
}
