/*
** x86.h -- the host CPU family (target "llvm ...", "c"): its AutoTVM
** templates (targets/x86/templates.c) and its target (target.c).
*/
#ifndef TL_X86_H
#define TL_X86_H

#include "../target.h"

extern const tl_atvm_template tl_x86_conv2d_nchwc, tl_x86_depthwise_nchwc, tl_x86_dense_pack,
    tl_x86_dense_nopack;
/* winograd.c: Winograd F(m x m, 3 x 3) on the blocked layout */
extern const tl_atvm_template tl_x86_conv2d_nchwc_winograd;
/* templates.c: rows per parallel chunk of a loop over OH rows (of outputs or of Winograd
** tiles) whose first and last rows are partitioned, given the parallel chunks outside it;
** uneven: a cut that does not divide OH may be taken */
int64_t tl_x86_border_rows(int64_t OH, int uneven, int64_t chunks);

#endif
