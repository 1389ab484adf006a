/*
** device.c -- the device-API registry and the built-in CPU device.
**
** One slot per DLPack device type holds the tl_device_api that allocates,
** frees and copies memory of that type. The CPU slot is filled statically
** with the host API (aligned_alloc, memmove) and cannot be replaced; OpenCL
** and VTA register their tables when they start. Slots are read and written
** with atomic loads and stores, so lookups from pool threads need no lock.
** Storage remembers the API that allocated it (see ndarray.c), so replacing
** a non-CPU API later never frees memory through the wrong table.
*/
#include <stdio.h>

#include "runtime.h"

/* ---- the CPU device -------------------------------------------------------- */

static int cpu_alloc(tl_ctx *ctx, int dev_id, size_t nbytes, size_t align, void **out) {
  void *p = NULL;
  if (align < sizeof(void *)) align = sizeof(void *);
  if (align & (align - 1))
    return tl_err(ctx, TL_E_INTERNAL, "cpu: alignment %zu is not a power of two", align);
  size_t n = ((nbytes ? nbytes : 1) + align - 1) & ~(align - 1);   /* a multiple of align */
  if (nbytes > SIZE_MAX - align || !(p = aligned_alloc(align, n)))
    return tl_err(ctx, TL_E_NOMEM, "out of memory allocating %zu bytes on cpu:%d", nbytes,
                  dev_id);
  *out = p;
  return TL_OK;
}

static void cpu_free(int dev_id, void *p) { free(p); }

static int cpu_copy(tl_ctx *ctx, const void *src, size_t src_offset, DLDevice src_dev,
                    void *dst, size_t dst_offset, DLDevice dst_dev, size_t nbytes) {
  if (src_dev.device_type != kDLCPU || dst_dev.device_type != kDLCPU)
    return tl_err(ctx, TL_E_INTERNAL, "cpu: asked to copy between %s and %s",
                  tl_device_type_name(src_dev.device_type),
                  tl_device_type_name(dst_dev.device_type));
  memmove((char *)dst + dst_offset, (const char *)src + src_offset, nbytes);
  return TL_OK;
}

static int cpu_sync(tl_ctx *ctx, int dev_id) { return TL_OK; }

static const tl_device_api cpu_api = {
  .name = "cpu",
  .dev_type = kDLCPU,
  .alloc = cpu_alloc,
  .free = cpu_free,
  .copy = cpu_copy,
  .sync = cpu_sync,
};

/* ---- registry ------------------------------------------------------------------ */

static const tl_device_api *apis[TL_DEV_MAX] = {[kDLCPU] = &cpu_api};

int tl_device_register(const tl_device_api *api) {
  if (!api || api->dev_type <= 0 || api->dev_type >= TL_DEV_MAX || !api->name ||
      !api->alloc || !api->free || !api->copy)
    return TL_E_ARG;
  if (api->dev_type == kDLCPU) return TL_E_ARG;  /* built in, see above */
  __atomic_store_n(&apis[api->dev_type], api, __ATOMIC_RELEASE);
  return TL_OK;
}

const tl_device_api *tl_device_get(int dev_type) {
  if (dev_type <= 0 || dev_type >= TL_DEV_MAX) return NULL;
  return __atomic_load_n(&apis[dev_type], __ATOMIC_ACQUIRE);
}

const char *tl_device_type_name(int dev_type) {
  switch (dev_type) {
  case kDLCPU: return "cpu";
  case kDLCUDA: return "cuda";
  case kDLCUDAHost: return "cuda_host";
  case kDLOpenCL: return "opencl";
  case kDLVulkan: return "vulkan";
  case kDLMetal: return "metal";
  case kDLVPI: return "vpi";
  case kDLROCM: return "rocm";
  case kDLROCMHost: return "rocm_host";
  case kDLExtDev: return "ext_dev";
  case kDLCUDAManaged: return "cuda_managed";
  default: break;
  }
  const tl_device_api *api = tl_device_get(dev_type);
  return api ? api->name : "unknown";
}
