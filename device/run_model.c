/*
** run_model.c -- tunelua-run: run an exported network (a .tlpack of
** lib:export_library) with the device runtime (tl_runtime.h) and print its top
** classes and its time; the example program an app's code starts from.
**
**   tunelua-run model.tlpack input.bin [-o output.bin] [-n NUMBER] [-r REPEAT] [--top K]
**
** input.bin holds the first input's bytes exactly (float32 NCHW for an image
** network); -o writes the first output's bytes. The time is the time
** evaluator's (warm-up, then REPEAT measurements of NUMBER runs; defaults 1, 3).
*/
#include "tl_runtime.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long sz = ftell(f);
  fseek(f, 0, SEEK_SET);
  void *b = sz >= 0 ? malloc((size_t)sz + 1) : NULL;
  if (!b || fread(b, 1, (size_t)sz, f) != (size_t)sz) {
    free(b);
    fclose(f);
    return NULL;
  }
  fclose(f);
  *n = (size_t)sz;
  return b;
}

int main(int argc, char **argv) {
  const char *pack = NULL, *input = NULL, *outp = NULL;
  int number = 1, repeat = 3, top = 5;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "-o") && i + 1 < argc) outp = argv[++i];
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) number = atoi(argv[++i]);
    else if (!strcmp(argv[i], "-r") && i + 1 < argc) repeat = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--top") && i + 1 < argc) top = atoi(argv[++i]);
    else if (!pack) pack = argv[i];
    else if (!input) input = argv[i];
    else pack = NULL, i = argc;
  }
  if (!pack || !input || number < 1 || repeat < 0 || top < 0) {
    fprintf(stderr, "usage: tunelua-run model.tlpack input.bin [-o output.bin] [-n NUMBER] "
                    "[-r REPEAT] [--top K]\n");
    return 2;
  }
  char err[1024];
  tl_runtime *rt;
  if (tl_runtime_load(pack, &rt, err, sizeof err)) {
    fprintf(stderr, "tunelua-run: %s\n", err);
    return 1;
  }
  size_t want = 0, n = 0;
  const char *dtype;
  if (tl_runtime_num_inputs(rt) < 1 || tl_runtime_input_info(rt, 0, NULL, NULL, &dtype, &want)) {
    fprintf(stderr, "tunelua-run: '%s' has no input\n", pack);
    return 1;
  }
  void *in = read_file(input, &n);
  if (!in) {
    fprintf(stderr, "tunelua-run: cannot read '%s': %s\n", input, strerror(errno));
    return 1;
  }
  if (n != want) {
    fprintf(stderr, "tunelua-run: '%s' holds %zu bytes; input '%s' (%s) takes %zu\n", input, n,
            tl_runtime_input_name(rt, 0), dtype, want);
    return 1;
  }
  size_t ob;
  const char *odt;
  tl_runtime_output_info(rt, 0, NULL, NULL, &odt, &ob);
  void *out = malloc(ob ? ob : 1);
  if (tl_runtime_set_input(rt, tl_runtime_input_name(rt, 0), in, n) || tl_runtime_run(rt) ||
      tl_runtime_get_output(rt, 0, out, ob)) {
    fprintf(stderr, "tunelua-run: %s\n", tl_runtime_error(rt));
    return 1;
  }
  if (outp) {
    FILE *f = fopen(outp, "wb");
    if (!f || fwrite(out, 1, ob, f) != ob || fclose(f) != 0) {
      fprintf(stderr, "tunelua-run: cannot write '%s': %s\n", outp, strerror(errno));
      return 1;
    }
  }
  printf("target: %s\n", tl_runtime_target(rt));
  if (!strcmp(odt, "float32") && top > 0) {
    const float *p = out;
    size_t k = ob / 4;
    int *best = calloc((size_t)top, sizeof *best), nb = 0;
    for (size_t i = 0; i < k; i++) {
      int pos = nb < top ? nb++ : top;
      while (pos > 0 && p[best[pos - 1]] < p[i]) {
        if (pos < top) best[pos] = best[pos - 1];
        pos--;
      }
      if (pos < top) best[pos] = (int)i;
    }
    for (int i = 0; i < nb; i++) printf("class %d: %.6g\n", best[i], (double)p[best[i]]);
    free(best);
  }
  if (repeat > 0) {
    double *secs = calloc((size_t)repeat, sizeof *secs), sum = 0;
    if (tl_runtime_time(rt, number, repeat, 0, secs)) {
      fprintf(stderr, "tunelua-run: %s\n", tl_runtime_error(rt));
      return 1;
    }
    for (int i = 0; i < repeat; i++) sum += secs[i];
    printf("time: %.3f ms per run (mean of %d)\n", sum / repeat * 1e3, repeat);
    /* the median too (an insertion sort of the repeats) */
    for (int i = 1; i < repeat; i++)
      for (int j = i; j > 0 && secs[j - 1] > secs[j]; j--) {
        double t = secs[j];
        secs[j] = secs[j - 1], secs[j - 1] = t;
      }
    double med = repeat % 2 ? secs[repeat / 2] : (secs[repeat / 2 - 1] + secs[repeat / 2]) / 2;
    printf("median: %.3f ms per run (min %.3f, max %.3f)\n", med * 1e3, secs[0] * 1e3,
           secs[repeat - 1] * 1e3);
    free(secs);
  }
  free(in);
  free(out);
  tl_runtime_free(rt);
  return 0;
}
