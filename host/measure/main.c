/*
** main.c -- tunelua-measure-opencl, exec'd by libtunelua to measure OpenCL kernels
** (core/measure/measure_opencl.c, docs/measure_opencl.md):
**   tunelua-measure-opencl --worker    the persistent worker: starts the driver once and
**                                      measures the jobs framed on its stdin, one at a time,
**                                      answering each on its stdout; ends at end of input;
**   tunelua-measure-opencl JOB.json    one trial, with a child per trial once the calling
**                                      process has initialized OpenCL itself (a forked child
**                                      would inherit that driver, which is not fork-safe):
**                                      the same child code as a forked trial, answered on stdout.
**
** It ends as a forked trial does, through _exit (the one-trial child once its answer is
** written, the worker at the end of its input): no exit handler (a driver's, or a leak
** checker's in a sanitized build) can turn a finished trial into a failed one.
*/
#include <stdio.h>
#include <unistd.h>

int tl_measure_opencl_exec_main(int argc, char **argv);

int main(int argc, char **argv) {
  int rc = tl_measure_opencl_exec_main(argc, argv);
  fflush(NULL);
  _exit(rc);
}
