/*
** inflate.c -- zlib stream decoding (RFC 1950 wrapper, RFC 1951 deflate:
** stored, fixed and dynamic Huffman blocks; the Adler-32 checked) for the
** device programs, which link no zlib: session uploads arrive compressed.
** Canonical Huffman codes are decoded bit by bit from per-length counts.
*/
#include "inflate.h"

#include <string.h>

typedef struct {
  const unsigned char *in;
  size_t inlen, pos;
  unsigned bitbuf, bitcnt;
  unsigned char *out;
  size_t outlen, outpos;
} st;

typedef struct { short count[16], symbol[288]; } huff;

static int bits(st *s, int need, int *v) {
  unsigned long val = s->bitbuf;
  while (s->bitcnt < (unsigned)need) {
    if (s->pos >= s->inlen) return -1;
    val |= (unsigned long)s->in[s->pos++] << s->bitcnt;
    s->bitcnt += 8;
  }
  s->bitbuf = (unsigned)(val >> need);
  s->bitcnt -= (unsigned)need;
  *v = (int)(val & ((1UL << need) - 1));
  return 0;
}

static int build(huff *h, const short *len, int n) {
  short offs[16];
  memset(h->count, 0, sizeof h->count);
  for (int i = 0; i < n; i++) h->count[len[i]]++;
  if (h->count[0] == n) return 0;
  int left = 1;
  for (int l = 1; l < 16; l++) {
    left <<= 1;
    left -= h->count[l];
    if (left < 0) return -1;
  }
  offs[1] = 0;
  for (int l = 1; l < 15; l++) offs[l + 1] = (short)(offs[l] + h->count[l]);
  for (int i = 0; i < n; i++)
    if (len[i]) h->symbol[offs[len[i]]++] = (short)i;
  return left;
}

static int decode(st *s, const huff *h) {
  int code = 0, first = 0, index = 0;
  for (int l = 1; l < 16; l++) {
    int b;
    if (bits(s, 1, &b)) return -1;
    code |= b;
    int count = h->count[l];
    if (code - count < first) return h->symbol[index + (code - first)];
    index += count;
    first += count;
    first <<= 1;
    code <<= 1;
  }
  return -2;
}

static const short lbase[29] = {3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31,
                                35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258};
static const short lext[29] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2,
                               3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0};
static const short dbase[30] = {1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129,
                                193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
                                6145, 8193, 12289, 16385, 24577};
static const short dext[30] = {0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6,
                               6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13};

static int codes(st *s, const huff *lc, const huff *dc) {
  for (;;) {
    int sym = decode(s, lc);
    if (sym < 0) return -1;
    if (sym < 256) {
      if (s->outpos >= s->outlen) return -2;
      s->out[s->outpos++] = (unsigned char)sym;
    } else if (sym == 256) {
      return 0;
    } else {
      sym -= 257;
      if (sym >= 29) return -1;
      int e, len, d;
      if (bits(s, lext[sym], &e)) return -1;
      len = lbase[sym] + e;
      int ds = decode(s, dc);
      if (ds < 0 || ds >= 30) return -1;
      if (bits(s, dext[ds], &e)) return -1;
      d = dbase[ds] + e;
      if ((size_t)d > s->outpos) return -1;
      if (s->outpos + (size_t)len > s->outlen) return -2;
      for (int k = 0; k < len; k++, s->outpos++) s->out[s->outpos] = s->out[s->outpos - (size_t)d];
    }
  }
}

static int stored(st *s) {
  s->bitbuf = 0, s->bitcnt = 0;
  if (s->pos + 4 > s->inlen) return -1;
  unsigned len = s->in[s->pos] | (s->in[s->pos + 1] << 8);
  unsigned nlen = s->in[s->pos + 2] | (s->in[s->pos + 3] << 8);
  s->pos += 4;
  if (len != (~nlen & 0xffff)) return -1;
  if (s->pos + len > s->inlen) return -1;
  if (s->outpos + len > s->outlen) return -2;
  memcpy(s->out + s->outpos, s->in + s->pos, len);
  s->pos += len, s->outpos += len;
  return 0;
}

static int fixed(st *s) {
  static huff lc, dc;
  static int ready;
  if (!ready) {
    short len[288];
    int i = 0;
    for (; i < 144; i++) len[i] = 8;
    for (; i < 256; i++) len[i] = 9;
    for (; i < 280; i++) len[i] = 7;
    for (; i < 288; i++) len[i] = 8;
    build(&lc, len, 288);
    for (i = 0; i < 30; i++) len[i] = 5;
    build(&dc, len, 30);
    ready = 1;
  }
  return codes(s, &lc, &dc);
}

static int dynamic(st *s) {
  static const short order[19] = {16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15};
  int nlen, ndist, ncode, v;
  if (bits(s, 5, &nlen) || bits(s, 5, &ndist) || bits(s, 4, &ncode)) return -1;
  nlen += 257, ndist += 1, ncode += 4;
  if (nlen > 286 || ndist > 30) return -1;
  short len[320];
  memset(len, 0, sizeof len);
  for (int i = 0; i < ncode; i++) {
    if (bits(s, 3, &v)) return -1;
    len[order[i]] = (short)v;
  }
  huff lc, dc;
  if (build(&lc, len, 19) != 0) return -1;
  int idx = 0;
  while (idx < nlen + ndist) {
    int sym = decode(s, &lc);
    if (sym < 0) return -1;
    if (sym < 16) { len[idx++] = (short)sym; continue; }
    int rep, val = 0;
    if (sym == 16) {
      if (idx == 0) return -1;
      val = len[idx - 1];
      if (bits(s, 2, &rep)) return -1;
      rep += 3;
    } else if (sym == 17) {
      if (bits(s, 3, &rep)) return -1;
      rep += 3;
    } else {
      if (bits(s, 7, &rep)) return -1;
      rep += 11;
    }
    if (idx + rep > nlen + ndist) return -1;
    while (rep--) len[idx++] = (short)val;
  }
  if (len[256] == 0) return -1;
  int e = build(&lc, len, nlen);
  if (e < 0 || (e > 0 && nlen - lc.count[0] != 1)) return -1;
  e = build(&dc, len + nlen, ndist);
  if (e < 0 || (e > 0 && ndist - dc.count[0] != 1)) return -1;
  return codes(s, &lc, &dc);
}

int tl_inflate_zlib(const unsigned char *in, size_t inlen, unsigned char *out, size_t outlen,
                    size_t *got) {
  *got = 0;
  if (inlen < 6) return -1;
  unsigned cmf = in[0], flg = in[1];
  if ((cmf & 15) != 8 || ((cmf << 8) | flg) % 31 != 0 || (flg & 0x20)) return -1;
  st s = {in, inlen - 4, 2, 0, 0, out, outlen, 0};
  int last, type, rc = 0;
  do {
    if (bits(&s, 1, &last) || bits(&s, 2, &type)) return -1;
    if (type == 0) rc = stored(&s);
    else if (type == 1) rc = fixed(&s);
    else if (type == 2) rc = dynamic(&s);
    else return -1;
    if (rc) return rc;
  } while (!last);
  const unsigned char *a = in + inlen - 4;
  unsigned long want = ((unsigned long)a[0] << 24) | ((unsigned long)a[1] << 16) | ((unsigned long)a[2] << 8) | a[3];
  unsigned long s1 = 1, s2 = 0;
  for (size_t i = 0; i < s.outpos; i++) {
    s1 = (s1 + out[i]) % 65521;
    s2 = (s2 + s1) % 65521;
  }
  if (((s2 << 16) | s1) != want) return -1;
  *got = s.outpos;
  return 0;
}
