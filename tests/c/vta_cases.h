/*
** vta_cases.h -- conv2d_packed workloads shared by the VTA C tests: a second
** configuration (BATCH 2, BLOCK 8) and six packed conv2d argument lists, the first
** five for the default configuration, the last for the second one. Each entry is
** data (N/b, CI/B, H, W, b, B), kernel (CO/B, CI/B, KH, KW, B, B), stride, pad.
*/
#ifndef TL_TEST_VTA_CASES_H
#define TL_TEST_VTA_CASES_H

static const char vta_b2_json[] =
    "{\"TARGET\":\"sim\",\"HW_VER\":\"0.0.2\",\"LOG_INP_WIDTH\":3,"
    "\"LOG_WGT_WIDTH\":3,\"LOG_ACC_WIDTH\":5,\"LOG_BATCH\":1,"
    "\"LOG_BLOCK\":3,\"LOG_UOP_BUFF_SIZE\":15,\"LOG_INP_BUFF_SIZE\":15,"
    "\"LOG_WGT_BUFF_SIZE\":16,\"LOG_ACC_BUFF_SIZE\":17}";

enum { VTA_CONV_CASES = 6, VTA_CONV_DEFAULT_CASES = 5 };
static const char *const vta_conv_cases[VTA_CONV_CASES] = {
    "[[\"TENSOR\",[1,2,8,8,1,16],\"int8\"],[\"TENSOR\",[4,2,3,3,16,16],\"int8\"],[1,1],[1,1,1,1],[1,1],\"NCHW1n16c\",\"int32\"]",
    "[[\"TENSOR\",[1,3,9,7,1,16],\"int8\"],[\"TENSOR\",[2,3,3,3,16,16],\"int8\"],[2,2],[1,1,1,1],[1,1],\"NCHW1n16c\",\"int32\"]",
    "[[\"TENSOR\",[1,2,6,6,1,16],\"int8\"],[\"TENSOR\",[6,2,1,1,16,16],\"int8\"],[1,1],[0,0,0,0],[1,1],\"NCHW1n16c\",\"int32\"]",
    "[[\"TENSOR\",[2,1,10,10,1,16],\"int8\"],[\"TENSOR\",[3,1,3,3,16,16],\"int8\"],[2,2],[1,1,1,1],[1,1],\"NCHW1n16c\",\"int32\"]",
    "[[\"TENSOR\",[1,2,8,8,1,16],\"int8\"],[\"TENSOR\",[2,2,1,1,16,16],\"int8\"],[2,2],[0,0,0,0],[1,1],\"NCHW1n16c\",\"int32\"]",
    "[[\"TENSOR\",[1,3,6,6,2,8],\"int8\"],[\"TENSOR\",[4,3,3,3,8,8],\"int8\"],[1,1],[1,1,1,1],[1,1],\"NCHW2n8c\",\"int32\"]",
};

#endif
