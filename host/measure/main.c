/*
** main.c -- tunelua-measure-opencl: the OpenCL measurement child that libtunelua execs
** instead of forking once the calling process has initialized OpenCL itself (a forked
** child would inherit that driver, which is not fork-safe). It reads one job file (OpenCL C,
** manifest, limits, reference), runs the same child code as a forked trial and answers on
** its stdout (core/measure/measure_opencl.c, docs/measure_opencl.md).
*/
int tl_measure_opencl_exec_main(int argc, char **argv);

int main(int argc, char **argv) { return tl_measure_opencl_exec_main(argc, argv); }
