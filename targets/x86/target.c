/*
** target.c -- the host CPU family: "llvm" and "c" targets (the system C
** compiler builds both). A target naming -mcpu or -mattr describes that
** machine (AVX-512 or AVX2); a plain one describes the host, probed once.
**
** Kernels of a plain target build with "-O3 -march=native"; a target naming
** -mcpu/-mattr builds with that machine's -march (x86_toolchain), so AVX2
** code can be made and measured on an AVX-512 host. A target whose
** -mcpu/-mattr needs an extension the host lacks can be parsed, read from
** logs and tuned through RPC, but not built or measured here:
** x86_host_check says so (tl_target_check_host).
*/
#include "x86.h"

#include <stdio.h>
#include <stdlib.h>

/* ---- ISA extensions ------------------------------------------------------------------ */

/* The extensions the family knows: the -mattr name, the /proc/cpuinfo flag,
** the name in messages. One row per bit of a feature mask. */
#define X86_FEATURES(X)                                   \
  X(SSE42, "sse4.2", "sse4_2", "SSE4.2")                 \
  X(AVX, "avx", "avx", "AVX")                            \
  X(AVX2, "avx2", "avx2", "AVX2")                        \
  X(FMA, "fma", "fma", "FMA")                            \
  X(AVX512F, "avx512f", "avx512f", "AVX-512")            \
  X(AVX512BW, "avx512bw", "avx512bw", "AVX-512BW")       \
  X(AVX512VNNI, "avx512vnni", "avx512_vnni", "AVX-512 VNNI") \
  X(AVX512BF16, "avx512bf16", "avx512_bf16", "AVX-512 BF16") \
  X(AVX512FP16, "avx512fp16", "avx512_fp16", "AVX-512 FP16") \
  X(AMXTILE, "amx-tile", "amx_tile", "AMX")

enum {
#define X(id, attr, flag, name) F_##id##_BIT,
  X86_FEATURES(X)
#undef X
};
#define F(id) (1u << F_##id##_BIT)

static const struct { const char *attr, *flag, *name; } features[] = {
#define X(id, attr, flag, name) {attr, flag, name},
    X86_FEATURES(X)
#undef X
};

#define F_HASWELL (F(SSE42) | F(AVX) | F(AVX2) | F(FMA))
#define F_SKX (F_HASWELL | F(AVX512F) | F(AVX512BW))

/* -mcpu names, what their code needs and the C flags that build it (GCC's
** -march of the same name; GCC 12 has no znver4: znver3 with its AVX-512). */
#define ZNVER4_FLAGS \
  "-O3 -march=znver3 -mavx512f -mavx512bw -mavx512cd -mavx512dq -mavx512vl -mavx512vnni -mavx512bf16"
static const struct { const char *mcpu; unsigned need; tl_toolchain tc; } cpus[] = {
#define CPU(name, need) {name, need, {NULL, "-O3 -march=" name, NULL, NULL, 0}}
    CPU("haswell", F_HASWELL),
    CPU("broadwell", F_HASWELL),
    CPU("skylake", F_HASWELL),
    CPU("core-avx2", F_HASWELL),
    CPU("alderlake", F_HASWELL),
    CPU("znver1", F_HASWELL),
    CPU("znver2", F_HASWELL),
    CPU("znver3", F_HASWELL),
    CPU("skylake-avx512", F_SKX),
    CPU("icelake-client", F_SKX | F(AVX512VNNI)),
    CPU("icelake-server", F_SKX | F(AVX512VNNI)),
    CPU("tigerlake", F_SKX | F(AVX512VNNI)),
    CPU("cascadelake", F_SKX | F(AVX512VNNI)),
    CPU("cooperlake", F_SKX | F(AVX512VNNI) | F(AVX512BF16)),
    {"znver4", F_SKX | F(AVX512VNNI) | F(AVX512BF16), {NULL, ZNVER4_FLAGS, NULL, NULL, 0}},
    CPU("sapphirerapids", F_SKX | F(AVX512VNNI) | F(AVX512BF16) | F(AVX512FP16) | F(AMXTILE)),
#undef CPU
};

/* The host's extensions: $TUNELUA_HOST_CPU_FLAGS when set (a test hook: the
** /proc/cpuinfo flags of the machine to pretend to be, blank-separated),
** else the CPU's, probed once. */
static unsigned host_features(void) {
  const char *env = getenv("TUNELUA_HOST_CPU_FLAGS");
  if (env) {
    unsigned m = 0;
    for (const char *p = env; *p;) {
      size_t n = strcspn(p, " \t\n");
      for (size_t i = 0; i < TL_ARRAY_SIZE(features); i++)
        if (n == strlen(features[i].flag) && strncmp(p, features[i].flag, n) == 0) m |= 1u << i;
      p += n + (p[n] != 0);
    }
    return m;
  }
  static int probed;
  static unsigned m;
  if (!probed) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();   /* the -mattr names are the builtin's feature names */
#define X(id, attr, flag, name) m |= __builtin_cpu_supports(attr) ? F(id) : 0;
    X86_FEATURES(X)
#undef X
#endif
    probed = 1;
  }
  return m;
}

/* The host CPU's name as /proc/cpuinfo gives it (into buf). */
static const char *host_model(char *buf, size_t n) {
  snprintf(buf, n, "unknown model");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return buf;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "model name", 10) != 0) continue;
    const char *v = strchr(line, ':');
    if (!v) break;
    v += 1 + (v[1] == ' ');
    snprintf(buf, n, "%.*s", (int)strcspn(v, "\n"), v);
    break;
  }
  fclose(f);
  return buf;
}

/* Whether -mcpu or -mattr names an AVX-512 machine (a substring test, so
** "icelake-server" and "+avx512f,+avx512bw" count). */
static int names_avx512(const tl_target *t) {
  static const char *const avx512[] = {"avx512",     "skylake-avx512", "cascadelake", "icelake",
                                       "cooperlake", "sapphirerapids", "tigerlake",   "znver4"};
  const char *opts[2] = {tl_target_option(t, "mcpu"), tl_target_option(t, "mattr")};
  int wide = 0;
  for (int o = 0; o < 2; o++)
    for (size_t i = 0; opts[o] && i < TL_ARRAY_SIZE(avx512); i++) wide |= strstr(opts[o], avx512[i]) != NULL;
  return wide;
}

/* What the target's -mcpu and -mattr (the "+ext" entries) need. */
static unsigned target_needs(const tl_target *t) {
  unsigned need = 0;
  const char *mcpu = tl_target_option(t, "mcpu"), *mattr = tl_target_option(t, "mattr");
  for (size_t i = 0; mcpu && i < TL_ARRAY_SIZE(cpus); i++)
    if (strcmp(mcpu, cpus[i].mcpu) == 0) need |= cpus[i].need;
  for (const char *p = mattr; p && *p;) {
    size_t n = strcspn(p, ",");
    if (*p == '+')
      for (size_t i = 0; i < TL_ARRAY_SIZE(features); i++)
        if (n - 1 == strlen(features[i].attr) && strncmp(p + 1, features[i].attr, n - 1) == 0)
          need |= 1u << i;
    p += n + (p[n] == ',');
  }
  if (names_avx512(t)) need |= F(AVX512F);
  return need;
}

static int explicit_machine(const tl_target *t) {
  return tl_target_option(t, "mcpu") || tl_target_option(t, "mattr");
}

/* float32 lanes and vector registers: with -mcpu or -mattr, 16 lanes and 32
** registers for an AVX-512 machine, else 8 and 16 (AVX2); a plain target
** takes the host's: AVX-512 16/32, AVX2 with FMA 8/16, else 4/16 (SSE). */
static void x86_hw(const tl_target *t, tl_target_hw *hw) {
  int lanes;
  if (explicit_machine(t)) {
    lanes = names_avx512(t) ? 16 : 8;
  } else {
    unsigned h = host_features();
    lanes = h & F(AVX512F) ? 16 : (h & (F(AVX2) | F(FMA))) == (F(AVX2) | F(FMA)) ? 8 : 4;
  }
  hw->lanes = lanes;
  hw->registers = lanes == 16 ? 32 : 16;
}

/* The C flags of a target naming its machine: -mcpu's own -march when it
** covers what -mattr adds, else the first -mcpu row (oldest first) whose
** extensions cover -mcpu and -mattr together (an unknown -mcpu counts as
** AVX2, or AVX-512 when its name says so, as x86_hw reads it), so code for
** an AVX2 target holds no AVX-512 instruction whatever the host. A plain
** target: NULL, the family's "-O3 -march=native". */
static const tl_toolchain *x86_toolchain(const tl_target *t) {
  if (!explicit_machine(t)) return NULL;
  unsigned need = target_needs(t) | (names_avx512(t) ? F_SKX : F_HASWELL);
  const char *mcpu = tl_target_option(t, "mcpu");
  for (size_t i = 0; mcpu && i < TL_ARRAY_SIZE(cpus); i++)
    if (strcmp(mcpu, cpus[i].mcpu) == 0 && (need & ~cpus[i].need) == 0) return &cpus[i].tc;
  static const char *const order[] = {"haswell", "skylake-avx512", "cascadelake", "cooperlake",
                                      "sapphirerapids"};
  for (size_t k = 0; k < TL_ARRAY_SIZE(order); k++)
    for (size_t i = 0; i < TL_ARRAY_SIZE(cpus); i++)
      if (strcmp(order[k], cpus[i].mcpu) == 0 && (need & ~cpus[i].need) == 0) return &cpus[i].tc;
  return NULL;
}

static int x86_host_check(tl_ctx *ctx, const tl_target *t) {
  unsigned missing = target_needs(t) & ~host_features();
  if (!missing) return TL_OK;
  size_t i = 0;
  while (!(missing & (1u << i))) i++;
  char model[256];
  return tl_err(ctx, TL_E_UNSUPPORTED,
                "target '%s' needs %s, which this CPU (%s) lacks: kernels built for it cannot run here",
                t->str, features[i].name, host_model(model, sizeof model));
}

static const tl_atvm_template *const templates[] = {&tl_x86_conv2d_nchwc, &tl_x86_depthwise_nchwc,
                                                    &tl_x86_dense_pack, &tl_x86_dense_nopack,
                                                    &tl_x86_conv2d_nchwc_winograd, NULL};

static const tl_target_impl_row impls[] = {
    {"conv2d", "conv2d_NCHWc.x86", "conv_layout", NULL},
    {"conv2d", "conv2d_NCHWc_winograd.x86", "conv_layout", "3x3s1"},
    {"depthwise_conv2d", "depthwise_conv2d_NCHWc.x86", "conv_layout", NULL},
    {"dense", "dense_nopack.x86", "dense", NULL},
    {"dense", "dense_pack.x86", "dense", NULL},
};

const tl_family tl_family_x86 = {
    .name = "x86",
    .kinds = (const char *const[]){"llvm", "c", NULL},
    .device = NULL,
    .options = (const char *const[]){"num-cores", NULL},
    .keys = (const char *const[]){"cpu", NULL},
    .schedules = "cpu",
    .backend = &tl_backend_c,
    .toolchain = {NULL, NULL, NULL},   /* the host compiler, "-O3 -march=native" */
    .toolchain_of = x86_toolchain,     /* -mcpu/-mattr: that machine's -march */
    .tophub_package = "llvm",
    .tophub_version = "v0.04",
    .templates = templates,
    .impls = impls,
    .nimpls = TL_ARRAY_SIZE(impls),
    .fallback_untuned = 0,
    .hw = x86_hw,
    .host_check = x86_host_check,
};
