/*
** ocl.h -- OpenCL on the device server (device/ocl.c): one measurement of an uploaded OpenCL
** module (OpenCL C + manifest, docs/measure_opencl.md), run in a measurement child of
** tunelua-rpc. The driver is loaded with dlopen in that child only (OpenCL drivers are not
** fork-safe: the server and its sessions never touch it). A static build has no dlopen of a
** driver and says so (docs/arm.md, "OpenCL on the device").
*/
#ifndef TL_DEVICE_OCL_H
#define TL_DEVICE_OCL_H

#include <stddef.h>

typedef struct {
  const char *src_path, *man_path;          /* the module: OpenCL C and its manifest */
  const char *ref_src_path, *ref_man_path;  /* check_correctness: the reference module, or NULL */
  int dev, number, repeat;
  double min_repeat_ms, build_s, run_s, rtol;
} dev_ocl_job;

/* The measurement child: writes the phase bytes 'b' (compiling), 'c' + a double (the driver's
** compile seconds), 'r' (running), then the answer (int32 error_no, int32 ncosts, the costs as
** doubles, the message) to fd, and ends the process. */
void dev_ocl_child(const dev_ocl_job *j, int fd) __attribute__((noreturn));

/* How this build reaches an OpenCL driver: "dlopen" (a dynamically linked build loads
** libOpenCL in each measurement child) or "none" (a static build). */
const char *dev_ocl_support(void);

#endif
