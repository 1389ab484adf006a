/*
** schedule_gpu.c -- default OpenCL schedules: tl_topi_default_schedule_gpu.
**
** Correct for any DAG of topi operators (and plain te computes), on a
** schedule without steps; what the graph executor and the ONNX runner use
** on OpenCL when no tuned configuration exists:
**
**   1. inline   every compute stage without a reduction that is not an
**               output and has one output tensor (pad, bias_add, relu,
**               softmax's exp, the injective producers of a fused group).
**   2. anchor   a reduction stage (conv2d, dense, pool, ...) whose only
**               loop consumer after inlining is one root stage without a
**               reduction and of its shape (conv2d + bias_add + relu) is
**               computed at that stage's thread loop: one kernel, the
**               accumulator private to the work-item.
**   3. bind     every other root stage with loops: its spatial axes fused
**               into one loop, split by the work-group size (64 threads
**               below 8192 iterations, 128 below 65536, else 256; the whole
**               extent when it is smaller than 64) and bound to blockIdx.x /
**               threadIdx.x (a non-divisible extent gets a guard); the
**               reduction axes stay inside the work-item, in order.
**
** A stage with no spatial axis (a full reduction to a scalar) is a kernel
** of one work-item.
**
** Channel-last anchors (conv2d_nhwc, depthwise_conv2d_nhwc, group and
** transposed NHWC convolutions, NHWC pools: 4-D, channels innermost) with
** their consumer are tiled instead of fused element by element: each
** work-item computes a tile of output columns (4 where 4 divides OW, else
** the largest divisor of OW up to 7) by up to 16 channels (a power of two
** dividing C, 4 at least when C allows, doubled while the tile holds at most
** 64 accumulators and at least 512 tiles are left), the
** tile's channels a vector (vloadN of the HWIO weights and of the input's
** channels, one vector store), its columns unrolled so that a weight vector
** serves every output of the tile, the reduction outside the tile and small
** kernel windows (up to 3) unrolled. One work-item walking a row of
** weights per reduction step reads a whole cache line of them with 16
** channels: on a CPU device (pocl) 4 channels ran 4-5x slower.
** The tiles are fused and bound as in 3. These are the CPU-device shapes
** (tl_topi_default_schedule_gpu, and tl_topi_default_schedule_gpu_for with
** shapes TL_GPU_SHAPES_CPU).
**
** The GPU shapes (TL_GPU_SHAPES_GPU, for a device of type GPU) give each
** work-item one output channel and a small register tile of wt columns
** (7, 4 or 2 dividing OW, else 1), with channels innermost in
** the fused thread loop: adjacent work-items of a work-group compute adjacent
** output channels, so their HWIO (or [KH, KW, C, M]) weight loads are one
** coalesced access, their input loads one broadcast address, and each
** weight serves wt FMAs. The tile is the widest that still leaves at least
** 128 work-items per compute unit (the whole grid fills the device), else
** one column; the reduction stays inside the work-item, small windows
** unrolled, as above. Work-groups: 256 work-items, halved down to 64 while
** there would be fewer than 4 work-groups per compute unit.
**
** Under the GPU shapes a windowed convolution (conv2d_nhwc, ungrouped, a window
** or a stride above 1: resnet's 3x3, 7x7 and 1x1 stride-2 layers; 1x1 stride-1
** and depthwise ones keep the tiles above) gets a bigger tile (tile_blocks):
** wt columns as above by ct = 4 or 2 channels (a vector; while at least 64
** work-items per compute unit are left), cw = 32 / ct work-items side by side
** on adjacent channel vectors (one 128-byte row of HWIO weights, one vloadN
** each), and the pixel tiles between those and the channel blocks in the fused
** thread index: the work-items of a work-group share their weights (wg / cw
** pixel tiles read each row) and consecutive work-groups walk the pixels of
** one channel block. Each weight vector feeds wt x ct FMAs, each input ct; the
** input channels split by 4 (16 for a 1x1 window), unrolled, so that 4 x the
** window's rows of weights (16 rows) are in flight per iteration. The tiles
** above (a work-group per pixel tile) read the whole weight tensor from L2 once
** per pixel tile.
*/
#include "topi.h"

#include "../te/schedule.h"

#include <string.h>

#define TRY(x) do { int rc_ = (x); if (rc_) return rc_; } while (0)

static int is_output(const tl_dag *dag, int op) {
  for (int i = 0; i < tl_dag_num_outputs(dag); i++)
    if (tl_dag_tensor_op(dag, tl_dag_output(dag, i)) == op) return 1;
  return 0;
}

/* Loop stages (not inlined) reading stage st, looking through inlined ones;
** returns the count (stops counting past max). */
static int loop_consumers(const tl_sched *s, int st, int *out, int max, int n) {
  const tl_dag *dag = tl_sched_dag((tl_sched *)s);
  int nops = tl_dag_num_ops(dag);
  for (int j = st + 1; j < nops && n <= max; j++) {
    int reads = 0;
    for (int i = 0; i < tl_dag_op_ninputs(dag, j) && !reads; i++)
      reads = tl_dag_tensor_op(dag, tl_dag_op_input(dag, j, i)) == st;
    if (!reads) continue;
    if (tl_sched_stage_compute_at(s, j, NULL, NULL) == TL_CA_INLINED) {
      n = loop_consumers(s, j, out, max, n);
    } else {
      int dup = 0;
      for (int k = 0; k < n && k < max; k++) dup |= out[k] == j;
      if (dup) continue;
      if (n < max) out[n] = j;
      n++;
    }
  }
  return n;
}

static int same_shape(const tl_dag *dag, int a, int b) {
  int ta = tl_dag_op_output(dag, a, 0), tb = tl_dag_op_output(dag, b, 0);
  int n = tl_dag_tensor_ndim(dag, ta);
  if (n != tl_dag_tensor_ndim(dag, tb)) return 0;
  return memcmp(tl_dag_tensor_shape(dag, ta), tl_dag_tensor_shape(dag, tb),
                (size_t)n * sizeof(int64_t)) == 0;
}

/* Fuse the ndim spatial axes of a fresh stage, split by the work-group size
** and bind; writes the thread loop's position (or -1). */
static int bind_stage(tl_ctx *ctx, tl_sched *s, int st, int *thread_pos) {
  const tl_dag *dag = tl_sched_dag(s);
  int nd = tl_dag_op_ndim(dag, st);
  *thread_pos = -1;
  if (nd < 1) return TL_OK;
  if (tl_sched_num_iters(s, st) != nd + tl_dag_op_nreduce(dag, st)) return TL_OK;   /* not fresh */
  if (nd > 1) {
    int f[64];
    if (nd > 64) return TL_OK;
    for (int i = 0; i < nd; i++) f[i] = i;
    TRY(tl_sched_fuse(ctx, s, st, nd, f));
  }
  int64_t e = tl_sched_iter_extent(s, st, 0);
  if (e <= 1) return TL_OK;
  int64_t wg = e < 8192 ? 64 : e < 65536 ? 128 : 256;
  if (e <= wg) {
    TRY(tl_sched_annotate(ctx, s, st, 0, TL_ANN_THREAD_X));
    *thread_pos = 0;
    return TL_OK;
  }
  TRY(tl_sched_split(ctx, s, st, 0, 1, &wg, 1));
  TRY(tl_sched_annotate(ctx, s, st, 0, TL_ANN_BLOCK_X));
  TRY(tl_sched_annotate(ctx, s, st, 1, TL_ANN_THREAD_X));
  *thread_pos = 1;
  return TL_OK;
}

/* A 4-D channel-last reduction: an NHWC convolution (tag or name ends in
** "_nhwc") or an op whose attributes say layout NHWC (the pools). */
static int channel_last(const tl_dag *dag, int op) {
  if (tl_dag_op_ndim(dag, op) != 4 || tl_dag_op_nreduce(dag, op) < 1) return 0;
  const char *names[2] = {tl_dag_op_tag(dag, op), tl_dag_op_name(dag, op)};
  for (int i = 0; i < 2; i++) {
    size_t n = names[i] ? strlen(names[i]) : 0;
    if (n >= 5 && strcmp(names[i] + n - 5, "_nhwc") == 0) return 1;
  }
  const char *aj = tl_dag_op(dag, op)->attrs_json;
  if (!aj) return 0;
  json_t *j = json_loads(aj, 0, NULL);
  const char *lay = j ? json_string_value(json_object_get(j, "layout")) : NULL;
  int r = lay && strcmp(lay, "NHWC") == 0;
  json_decref(j);
  return r;
}

static int64_t tile_of(int64_t extent) { return extent % 4 == 0 ? 4 : extent % 2 == 0 ? 2 : 1; }

/* Split the iterator at pos of a stage by factor (nothing for 1); returns
** how many iterators it became (1 or 2). */
static int split_by(tl_ctx *ctx, tl_sched *s, int st, int pos, int64_t factor, int *rc) {
  if (factor <= 1) return 1;
  *rc = tl_sched_split(ctx, s, st, pos, 1, &factor, 1);
  return 2;
}

/* How the channel-last tiles are shaped: gpu 0 (a CPU device's: wide
** vectors per work-item) or 1 (a GPU's: a channel per work-item, channels
** across the work-group); units: the GPU's compute units. */
typedef struct gpu_shape {
  int gpu;
  int64_t units;
} gpu_shape;

static int tile_columns(tl_ctx *ctx, tl_sched *s, int o, int a, int nr, int64_t wt, int64_t ct,
                        const gpu_shape *gs, int *done);
static int tile_blocks(tl_ctx *ctx, tl_sched *s, int o, int a, int nr, int64_t wt, int64_t ct,
                       int64_t cw, const gpu_shape *gs, int *done);

/* A regular (ungrouped) NHWC convolution whose window or stride is more than one:
** [rc, ry, rx] reduced, tag conv2d_nhwc, and ry x rx > 1 or a stride > 1 (the
** GPU shapes' blocked tiles; a 1x1 stride-1 convolution keeps the column tiles). */
static int windowed_conv(const tl_sched *s, const tl_dag *dag, int a) {
  const char *tag = tl_dag_op_tag(dag, a);
  if (!tag || strcmp(tag, "conv2d_nhwc") != 0 || tl_dag_op_nreduce(dag, a) != 3) return 0;
  if (tl_sched_iter_extent(s, a, 5) * tl_sched_iter_extent(s, a, 6) > 1) return 1;
  const char *aj = tl_dag_op(dag, a)->attrs_json;
  json_t *j = aj ? json_loads(aj, 0, NULL) : NULL;
  json_t *st = j ? json_object_get(j, "strides") : NULL;
  int r = 0;
  for (size_t i = 0; st && i < json_array_size(st); i++) r |= json_integer_value(json_array_get(st, i)) > 1;
  json_decref(j);
  return r;
}

/* The GPU shapes' column tile of a [N, H, W, C] output: the widest of 7, 4
** and 2 dividing W that leaves at least min_items work-items, else 1. */
static int64_t gpu_columns(int64_t N, int64_t H, int64_t W, int64_t C, int64_t min_items) {
  static const int64_t cand[3] = {4, 7, 2};
  int64_t best = 1;
  for (int i = 0; i < 3; i++) {
    int64_t w = cand[i];
    if (W % w != 0 || N * H * (W / w) * C < min_items) continue;
    if (w > best) best = w;
  }
  return best;
}

/* The consumer o (root, fresh, 4-D [N, H, W, C]) of channel-last anchor a:
** tiles of wt x ct bound, a computed at the thread. Returns TL_OK with
** *done 0 when the shapes leave nothing to tile (the caller binds as usual). */
static int tile_channel_last(tl_ctx *ctx, tl_sched *s, int o, int a, const gpu_shape *gs,
                             int *done) {
  const tl_dag *dag = tl_sched_dag(s);
  *done = 0;
  if (tl_sched_num_iters(s, o) != 4 || tl_dag_op_nreduce(dag, o) != 0) return TL_OK;
  int nr = tl_dag_op_nreduce(dag, a);
  if (nr > 24 || tl_sched_num_iters(s, a) != 4 + nr) return TL_OK;   /* (aord below holds 6 + nr) */
  int64_t W = tl_sched_iter_extent(s, o, 2), C = tl_sched_iter_extent(s, o, 3);
  if (gs->gpu && windowed_conv(s, dag, a)) {
    /* columns as below; channels: 4 or 2 a vector while at least 64 work-items per compute
    ** unit are left; cw work-items across channels read one 128-byte row of weights */
    /* sized for 16 x the compute units: a tile of these convs serves so many FMAs that
    ** the grid wants at least 2048 work-items per compute unit to hide the latency of its
    ** loads (H200, resnet-18's convs one by one against the NCHW defaults: per-layer sums
    ** 1.01x NCHW's at 16 x, 1.5-1.9x slower at 1 x and 4 x; docs/performance.md) */
    gpu_shape g16 = *gs;
    g16.units = 16 * gs->units;
    int64_t N = tl_sched_iter_extent(s, o, 0), H = tl_sched_iter_extent(s, o, 1);
    int64_t wt = gpu_columns(N, H, W, C, 128 * g16.units), ct = 1;
    for (int64_t c2 = 4; c2 >= 2 && ct == 1; c2 /= 2)
      if (C % c2 == 0 && N * H * (W / wt) * (C / c2) >= 64 * g16.units) ct = c2;
    int64_t cw = 32 / ct;
    while ((C / ct) % cw != 0) cw /= 2;
    return tile_blocks(ctx, s, o, a, nr, wt, ct, cw, &g16, done);
  }
  if (gs->gpu) {
    int64_t wt = gpu_columns(tl_sched_iter_extent(s, o, 0), tl_sched_iter_extent(s, o, 1), W, C,
                             128 * gs->units);
    return tile_columns(ctx, s, o, a, nr, wt, 1, gs, done);
  }
  /* columns: 4 when they divide W, else the largest divisor up to 7 (14 and 7 columns: 7) */
  int64_t wt = 1;
  if (W % 4 == 0) wt = 4;
  else
    for (int64_t d = 7; d >= 1; d--)
      if (W % d == 0) { wt = d; break; }
  int64_t ct = tile_of(C);
  /* channels: doubled up to 16 (a float16) while the tile holds at most 64 accumulators and
  ** at least 512 tiles are left */
  int64_t rest = tl_sched_iter_extent(s, o, 0) * tl_sched_iter_extent(s, o, 1) * (W / wt);
  for (int64_t c2 = ct * 2; c2 <= 16 && C % c2 == 0 && wt * c2 <= 64 && rest * (C / c2) >= 512; c2 *= 2)
    ct = c2;
  if (wt * ct < 4) return TL_OK;
  return tile_columns(ctx, s, o, a, nr, wt, ct, gs, done);
}

/* Bind o's fused outer loop of extent e: to threadIdx.x alone when it fits one
** work-group of wg, else split by wg into blockIdx.x and threadIdx.x. *tp: the
** position of the thread loop. */
static int bind_fused(tl_ctx *ctx, tl_sched *s, int o, int64_t e, int64_t wg, int *tp) {
  *tp = 0;
  if (e <= wg) return tl_sched_annotate(ctx, s, o, 0, TL_ANN_THREAD_X);
  TRY(tl_sched_split(ctx, s, o, 0, 1, &wg, 1));
  TRY(tl_sched_annotate(ctx, s, o, 0, TL_ANN_BLOCK_X));
  TRY(tl_sched_annotate(ctx, s, o, 1, TL_ANN_THREAD_X));
  *tp = 1;
  return TL_OK;
}

/* Tile consumer o and anchor a (nr reduction axes) by wt columns x ct channels
** (a vector when ct > 1), fuse and bind the tiles; *done = 1. */
static int tile_columns(tl_ctx *ctx, tl_sched *s, int o, int a, int nr, int64_t wt, int64_t ct,
                        const gpu_shape *gs, int *done) {
  int rc = TL_OK;
  /* o: n h w c -> n h wo wi co ci -> n h wo co | wi ci */
  int nc = split_by(ctx, s, o, 3, ct, &rc);
  if (rc) return rc;
  int nw = split_by(ctx, s, o, 2, wt, &rc);
  if (rc) return rc;
  int n_it = tl_sched_num_iters(s, o);
  int order[6], k = 0;
  order[k++] = 0, order[k++] = 1, order[k++] = 2;       /* n h wo */
  order[k++] = 2 + nw;                                   /* co */
  if (nw == 2) order[k++] = 3;                           /* wi */
  if (nc == 2) order[k++] = 2 + nw + 1;                  /* ci */
  TRY(tl_sched_reorder(ctx, s, o, n_it, order));
  int f[4] = {0, 1, 2, 3};
  TRY(tl_sched_fuse(ctx, s, o, 4, f));
  int64_t e = tl_sched_iter_extent(s, o, 0);
  int64_t wg = e < 8192 ? 64 : e < 65536 ? 128 : 256;
  /* GPU shapes: work-groups of 256 halved (down to 64) until there are at least 4 per
  ** compute unit, so that a small grid still spreads over the whole device */
  if (gs->gpu)
    for (wg = 256; wg > 64 && e / wg < 4 * gs->units; wg /= 2) {}
  int tp;
  TRY(bind_fused(ctx, s, o, e, wg, &tp));
  int p = tp + 1;
  if (nw == 2) TRY(tl_sched_annotate(ctx, s, o, p++, TL_ANN_UNROLL));
  if (nc == 2) TRY(tl_sched_annotate(ctx, s, o, p, TL_ANN_VECTORIZE));
  /* a at the thread: n h w c r.. -> n h wo wi co ci r.. -> n h wo co r.. wi ci */
  TRY(tl_sched_compute_at(ctx, s, a, o, tp));
  nc = split_by(ctx, s, a, 3, ct, &rc);
  if (rc) return rc;
  nw = split_by(ctx, s, a, 2, wt, &rc);
  if (rc) return rc;
  n_it = tl_sched_num_iters(s, a);
  int aord[32];
  k = 0;
  int rfirst = 4 + (nw - 1) + (nc - 1);
  aord[k++] = 0, aord[k++] = 1, aord[k++] = 2, aord[k++] = 2 + nw;
  for (int r = rfirst; r < n_it; r++) aord[k++] = r;
  if (nw == 2) aord[k++] = 3;
  if (nc == 2) aord[k++] = 2 + nw + 1;
  TRY(tl_sched_reorder(ctx, s, a, n_it, aord));
  for (int r = 4; r < 4 + nr; r++) {
    int64_t re = tl_sched_iter_extent(s, a, r);
    if (re > 1 && re <= 3) TRY(tl_sched_annotate(ctx, s, a, r, TL_ANN_UNROLL));
  }
  p = 4 + nr;
  if (nw == 2) TRY(tl_sched_annotate(ctx, s, a, p++, TL_ANN_UNROLL));
  if (nc == 2) TRY(tl_sched_annotate(ctx, s, a, p, TL_ANN_VECTORIZE));
  *done = 1;
  return TL_OK;
}

/* The GPU shapes' tiles of a windowed convolution a and its consumer o: each
** work-item wt columns x ct channels (a vector), cw work-items side by side on
** adjacent channel vectors, then the pixel tiles, then the channel blocks:
** o: n h w c -> n h wo wi co cw ci -> [n co h wo cw] wi ci, the bracket fused
** and bound; a at the thread, its reduction outside wi ci. *done = 1. */
static int tile_blocks(tl_ctx *ctx, tl_sched *s, int o, int a, int nr, int64_t wt, int64_t ct,
                       int64_t cw, const gpu_shape *gs, int *done) {
  int64_t cf[2] = {cw, ct};
  TRY(tl_sched_split(ctx, s, o, 3, 2, cf, 1));              /* n h w co cw ci */
  TRY(tl_sched_split(ctx, s, o, 2, 1, &wt, 1));             /* n h wo wi co cw ci */
  int order[7] = {0, 4, 1, 2, 5, 3, 6};
  TRY(tl_sched_reorder(ctx, s, o, 7, order));               /* n co h wo cw wi ci */
  int f[5] = {0, 1, 2, 3, 4};
  TRY(tl_sched_fuse(ctx, s, o, 5, f));
  int64_t e = tl_sched_iter_extent(s, o, 0), wg;
  for (wg = 256; wg > 64 && e / wg < 4 * gs->units; wg /= 2) {}
  int tp;
  TRY(bind_fused(ctx, s, o, e, wg, &tp));
  if (wt > 1) TRY(tl_sched_annotate(ctx, s, o, tp + 1, TL_ANN_UNROLL));
  if (ct > 1) TRY(tl_sched_annotate(ctx, s, o, tp + 2, TL_ANN_VECTORIZE));
  /* a: n h w c r.. -> n h wo wi co cw ci r.. -> n h wo co cw r.. wi ci */
  TRY(tl_sched_compute_at(ctx, s, a, o, tp));
  TRY(tl_sched_split(ctx, s, a, 3, 2, cf, 1));
  TRY(tl_sched_split(ctx, s, a, 2, 1, &wt, 1));
  /* the input channels by 4 (16 for a 1x1 window), unrolled innermost of the reduction: 4 x
  ** the window's rows of weights (each a new cache line) in flight at once */
  int64_t rce = tl_sched_iter_extent(s, a, 7);
  int64_t rc4 = tl_sched_iter_extent(s, a, 8) * tl_sched_iter_extent(s, a, 9) == 1 && rce % 16 == 0 &&
                rce >= 32 ? 16 : 4;
  int nrc = rce % rc4 == 0 && rce >= 2 * rc4 ? 2 : 1;
  if (nrc == 2) TRY(tl_sched_split(ctx, s, a, 7, 1, &rc4, 1));   /* .. rco rci ry rx */
  int n_it = tl_sched_num_iters(s, a);
  int aord[32], k = 0;
  aord[k++] = 0, aord[k++] = 1, aord[k++] = 2, aord[k++] = 4, aord[k++] = 5;
  aord[k++] = 7;
  for (int r = 7 + nrc; r < n_it; r++) aord[k++] = r;
  if (nrc == 2) aord[k++] = 8;
  aord[k++] = 3, aord[k++] = 6;
  TRY(tl_sched_reorder(ctx, s, a, n_it, aord));
  int nred = nr + nrc - 1;
  for (int r = 5; r < 5 + nred; r++) {
    int64_t re = tl_sched_iter_extent(s, a, r);
    if (re > 1 && (re <= 3 || (nrc == 2 && r == 4 + nred))) TRY(tl_sched_annotate(ctx, s, a, r, TL_ANN_UNROLL));
  }
  if (wt > 1) TRY(tl_sched_annotate(ctx, s, a, 5 + nred, TL_ANN_UNROLL));
  if (ct > 1) TRY(tl_sched_annotate(ctx, s, a, 6 + nred, TL_ANN_VECTORIZE));
  *done = 1;
  return TL_OK;
}

static int schedule_gpu(tl_ctx *ctx, tl_sched *s, const gpu_shape *gs);

TL_EXPORT int tl_topi_default_schedule_gpu(tl_ctx *ctx, tl_sched *s) {
  gpu_shape gs = {0, 0};
  return schedule_gpu(ctx, s, &gs);
}

TL_EXPORT int tl_topi_default_schedule_gpu_for(tl_ctx *ctx, tl_sched *s, int shapes,
                                               int64_t compute_units) {
  if (shapes != TL_GPU_SHAPES_CPU && shapes != TL_GPU_SHAPES_GPU)
    return tl_err(ctx, TL_E_ARG,
                  "default_schedule_gpu: shapes must be TL_GPU_SHAPES_CPU (0) or TL_GPU_SHAPES_GPU (1), "
                  "got %d", shapes);
  if (compute_units < 0)
    return tl_err(ctx, TL_E_ARG, "default_schedule_gpu: compute_units must be >= 0 (0: unknown), got %lld",
                  (long long)compute_units);
  /* an unknown device counts as 64 units */
  gpu_shape gs = {shapes == TL_GPU_SHAPES_GPU, compute_units > 0 ? compute_units : 64};
  return schedule_gpu(ctx, s, &gs);
}

static int schedule_gpu(tl_ctx *ctx, tl_sched *s, const gpu_shape *gs) {
  if (!s) return tl_err(ctx, TL_E_ARG, "default_schedule_gpu: no schedule");
  if (tl_sched_num_steps(s) != 0)
    return tl_err(ctx, TL_E_ARG, "default_schedule_gpu: the schedule already has %d steps",
                  tl_sched_num_steps(s));
  const tl_dag *dag = tl_sched_dag(s);
  int ns = tl_sched_num_stages(s);
  /* 1. inline */
  for (int st = 0; st < ns; st++) {
    if (tl_sched_stage_op_kind(s, st) != TL_DAG_COMPUTE) continue;
    if (tl_dag_op_nreduce(dag, st) > 0 || tl_dag_op_nout(dag, st) != 1 || is_output(dag, st))
      continue;
    TRY(tl_sched_compute_inline(ctx, s, st));
  }
  /* 2. anchors: reductions computed at their same-shape consumer's thread */
  int *anchor_of = tl_calloc((size_t)ns, sizeof(int));
  for (int st = 0; st < ns; st++) anchor_of[st] = -1;
  for (int st = 0; st < ns; st++) {
    if (tl_sched_stage_op_kind(s, st) != TL_DAG_COMPUTE || tl_dag_op_nreduce(dag, st) == 0 ||
        tl_dag_op_nout(dag, st) != 1 || is_output(dag, st) ||
        tl_sched_stage_compute_at(s, st, NULL, NULL) != TL_CA_ROOT)
      continue;
    int cons[2];
    int nc = loop_consumers(s, st, cons, 2, 0);
    if (nc != 1) continue;
    int o = cons[0];
    if (tl_dag_op_nreduce(dag, o) > 0 || anchor_of[o] >= 0 || !same_shape(dag, st, o)) continue;
    anchor_of[o] = st;
  }
  /* 3. bind (consumers first is not needed: stage ids do not shift) */
  int rc = TL_OK;
  for (int st = 0; st < ns && rc == TL_OK; st++) {
    if (tl_sched_stage_op_kind(s, st) != TL_DAG_COMPUTE) continue;
    if (tl_sched_stage_compute_at(s, st, NULL, NULL) != TL_CA_ROOT) continue;
    int is_anchor = 0;
    for (int o = 0; o < ns; o++) is_anchor |= anchor_of[o] == st;
    if (is_anchor) continue;
    int tp, done = 0;
    if (anchor_of[st] >= 0 && channel_last(dag, anchor_of[st])) {
      rc = tile_channel_last(ctx, s, st, anchor_of[st], gs, &done);
      if (rc != TL_OK || done) continue;
    }
    rc = bind_stage(ctx, s, st, &tp);
    if (rc == TL_OK && anchor_of[st] >= 0) {
      int a = anchor_of[st];
      if (tp >= 0) {
        rc = tl_sched_compute_at(ctx, s, a, st, tp);
      } else {
        rc = bind_stage(ctx, s, a, &tp);
      }
    }
  }
  free(anchor_of);
  return rc;
}
