/*
** inflate.h -- zlib stream decoding for the device programs (device/inflate.c).
*/
#ifndef TL_INFLATE_H
#define TL_INFLATE_H

#include <stddef.h>

/* Decode the zlib stream in[0..inlen) into out (at most outlen bytes): 0 with
** *got bytes written, -1 on a malformed stream or checksum, -2 when out is
** too small. */
int tl_inflate_zlib(const unsigned char *in, size_t inlen, unsigned char *out, size_t outlen,
                    size_t *got);

#endif
