/*
** main.c -- tunelua-measure-opencl: the OpenCL measurement child that libtunelua execs
** instead of forking once the calling process has initialized OpenCL itself (a forked
** child would inherit that driver, which is not fork-safe). It reads one job file (OpenCL C,
** manifest, limits, reference), runs the same child code as a forked trial and answers on
** its stdout (core/measure/measure_opencl.c, docs/measure_opencl.md).
**
** It ends as a forked trial does, through _exit once its answer is written: the process
** lives for one trial, the driver's state and the job's arrays go with it, and no exit
** handler (a driver's, or a leak checker's in a sanitized build) can turn a finished trial
** into a failed one.
*/
#include <stdio.h>
#include <unistd.h>

int tl_measure_opencl_exec_main(int argc, char **argv);

int main(int argc, char **argv) {
  int rc = tl_measure_opencl_exec_main(argc, argv);
  fflush(NULL);
  _exit(rc);
}
