/*
** hwparams.c -- the hardware params the auto-scheduler's rules and checks
** read (tl_ansor_hw): cores, vector and cache-line bytes, and for GPU
** targets the per-block limits (shared and local memory, threads, vthread
** extent) and the warp size.
**
** Defaults come from the parsed target (through the public target API):
**   CPU (backend "c")  num_cores from this process's affinity mask, vector
**                      bytes = float32 lanes x 4 (the host's, or -mcpu's;
**                      64 when the target knows no lanes), cache line 64,
**                      the GPU fields 0
**   OpenCL, no device info: the family's fixed table, if it has one
**                      (tl_target_fixed_hw_params: Mali's and Adreno's)
**   OpenCL with device info (tl_opencl_device_info's JSON, from a local
**                      device or an RPC server's)
**                      shared memory = local_mem_bytes, local memory
**                      INT32_MAX (unchecked), threads = max_work_group_size,
**                      warp = subgroup_size, vthread = max(1, warp / 4)
** A generic OpenCL target without device info has no defaults (an error
** naming the target). Every field may then be set; a value out of range is
** an error naming the field.
*/
#define _GNU_SOURCE
#include <jansson.h>
#include <limits.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ansor.h"

static const char *const field_names[TL_ANSOR_HW_NFIELDS] = {
    "num_cores", "vector_unit_bytes", "cache_line_bytes", "max_shared_memory_per_block",
    "max_local_memory_per_block", "max_threads_per_block", "max_vthread_extent", "warp_size"};

/* The least value a field takes: num_cores -1 means "unknown" (as TVM's
** GPU defaults have it), byte counts of vectors and cache lines are
** positive, the GPU limits are 0 on a CPU target. */
static const int64_t field_min[TL_ANSOR_HW_NFIELDS] = {-1, 1, 1, 0, 0, 0, 0, 0};

static int field_index(const char *name) {
  for (int i = 0; name && i < TL_ANSOR_HW_NFIELDS; i++)
    if (!strcmp(field_names[i], name)) return i;
  return -1;
}

static int64_t affinity_cores(void) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return 1;
}

static void set_all(tl_ansor_hw *hw, int64_t cores, int64_t vec, int64_t line, int64_t smem,
                    int64_t lmem, int64_t threads, int64_t vthread, int64_t warp) {
  int64_t v[TL_ANSOR_HW_NFIELDS] = {cores, vec, line, smem, lmem, threads, vthread, warp};
  memcpy(hw->v, v, sizeof v);
}

static int from_device(tl_ctx *ctx, tl_ansor_hw *hw, const char *device_info) {
  json_error_t e;
  json_t *o = json_loads(device_info, 0, &e);
  const char *miss = NULL;
  static const char *const need[3] = {"max_work_group_size", "local_mem_bytes", "subgroup_size"};
  json_int_t v[3] = {0, 0, 0};
  for (int i = 0; o && json_is_object(o) && i < 3 && !miss; i++) {
    json_t *x = json_object_get(o, need[i]);
    if (!json_is_integer(x) || json_integer_value(x) < 0) miss = need[i];
    else v[i] = json_integer_value(x);
  }
  if (!json_is_object(o)) {
    json_decref(o);
    return tl_err(ctx, TL_E_PARSE, "hardware params: the device info is not a JSON object (%s)",
                  e.text);
  }
  json_decref(o);
  if (miss)
    return tl_err(ctx, TL_E_PARSE, "hardware params: the device info has no non-negative "
                  "integer '%s'", miss);
  int64_t warp = v[2] > 0 ? v[2] : 1, vt = warp / 4 > 1 ? warp / 4 : 1;
  set_all(hw, -1, 16, 64, v[1], INT32_MAX, v[0], vt, warp);
  return TL_OK;
}

TL_EXPORT int tl_ansor_hw_new(tl_ctx *ctx, const struct tl_target *t, const char *device_info,
                              tl_ansor_hw **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_ansor_hw_new: out is NULL");
  *out = NULL;
  if (!t) return tl_err(ctx, TL_E_ARG, "tl_ansor_hw_new: target is NULL");
  const char *backend = tl_target_backend(t);
  if (!backend)
    return tl_err(ctx, TL_E_ARG, "hardware params: no defaults for target '%s' (no family takes "
                  "it)", tl_target_str(t));
  tl_ansor_hw hw;
  memset(&hw, 0, sizeof hw);
  int rc = TL_OK;
  if (!strcmp(backend, "c")) {
    int lanes = tl_target_lanes(t);
    set_all(&hw, affinity_cores(), lanes > 0 ? 4 * (int64_t)lanes : 64, 64, 0, 0, 0, 0, 0);
  } else if (!strcmp(backend, "opencl")) {
    if (device_info) rc = from_device(ctx, &hw, device_info);
    else if (tl_target_fixed_hw_params(t, hw.v) != 1)
      rc = tl_err(ctx, TL_E_ARG, "hardware params: target '%s' has no defaults without a "
                  "device: query an OpenCL device (local or remote) or give every field",
                  tl_target_str(t));
  } else {
    rc = tl_err(ctx, TL_E_ARG, "hardware params: no defaults for target '%s' (backend '%s')",
                tl_target_str(t), backend);
  }
  if (rc) return rc;
  *out = tl_malloc(sizeof **out);
  **out = hw;
  return TL_OK;
}

TL_EXPORT int tl_ansor_hw_new_values(tl_ctx *ctx, const int64_t *values, tl_ansor_hw **out) {
  if (!out) return tl_err(ctx, TL_E_ARG, "tl_ansor_hw_new_values: out is NULL");
  *out = NULL;
  if (!values) return tl_err(ctx, TL_E_ARG, "tl_ansor_hw_new_values: values is NULL");
  tl_ansor_hw hw;
  memset(&hw, 0, sizeof hw);
  for (int i = 0; i < TL_ANSOR_HW_NFIELDS; i++) {
    hw.v[i] = field_min[i];
    int rc = tl_ansor_hw_set(ctx, &hw, field_names[i], values[i]);
    if (rc) return rc;
  }
  *out = tl_malloc(sizeof **out);
  **out = hw;
  return TL_OK;
}

TL_EXPORT void tl_ansor_hw_free(tl_ansor_hw *hw) { free(hw); }

TL_EXPORT int tl_ansor_hw_num_fields(void) { return TL_ANSOR_HW_NFIELDS; }

TL_EXPORT const char *tl_ansor_hw_field_name(int i) {
  return i >= 0 && i < TL_ANSOR_HW_NFIELDS ? field_names[i] : NULL;
}

TL_EXPORT int tl_ansor_hw_get(tl_ctx *ctx, const tl_ansor_hw *hw, const char *field, int64_t *value) {
  int i = field_index(field);
  if (!hw || !value) return tl_err(ctx, TL_E_ARG, "tl_ansor_hw_get: hw or value is NULL");
  if (i < 0) return tl_err(ctx, TL_E_ARG, "hardware params: unknown field '%s'", field ? field : "(null)");
  *value = hw->v[i];
  return TL_OK;
}

TL_EXPORT int tl_ansor_hw_set(tl_ctx *ctx, tl_ansor_hw *hw, const char *field, int64_t value) {
  int i = field_index(field);
  if (!hw) return tl_err(ctx, TL_E_ARG, "tl_ansor_hw_set: hw is NULL");
  if (i < 0) return tl_err(ctx, TL_E_ARG, "hardware params: unknown field '%s'", field ? field : "(null)");
  if (value < field_min[i] || (i == 0 && value == 0) || value > INT32_MAX)
    return tl_err(ctx, TL_E_ARG, "hardware params: %s = %lld is out of range (expected %s)",
                  field_names[i], (long long)value,
                  i == 0 ? "-1 (unknown) or a positive count"
                  : field_min[i] > 0 ? "a positive integer up to 2147483647"
                  : "an integer from 0 to 2147483647");
  hw->v[i] = value;
  return TL_OK;
}
