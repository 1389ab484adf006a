/*
** djson.c -- a small JSON reader for the device programs (djson.h). Strings
** are decoded (escapes, \uXXXX to UTF-8); numbers are doubles; depth is
** bounded. Every node and string lives in one allocation, freed at once.
*/
#include "djson.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DJ_MAX_DEPTH 64

typedef struct {
  const char *p, *end;
  char *mem;
  size_t used, cap;
  char *err;
  size_t errn;
} parser;

static void *take(parser *ps, size_t n) {
  n = (n + 15) & ~(size_t)15;
  if (ps->used + n > ps->cap) return NULL;
  void *r = ps->mem + ps->used;
  ps->used += n;
  memset(r, 0, n);
  return r;
}

static void ws(parser *ps) {
  while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static int hexv(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static char *parse_string(parser *ps) {
  if (ps->p >= ps->end || *ps->p != '"') return NULL;
  ps->p++;
  const char *s = ps->p;
  size_t n = 0;
  while (s < ps->end && *s != '"') {   /* an upper bound of the decoded length */
    if (*s == '\\') s++;
    s++, n++;
  }
  char *out = take(ps, n * 3 + 1), *o = out;
  if (!out) return NULL;
  while (ps->p < ps->end && *ps->p != '"') {
    char c = *ps->p++;
    if ((unsigned char)c < 0x20) return NULL;
    if (c != '\\') { *o++ = c; continue; }
    if (ps->p >= ps->end) return NULL;
    c = *ps->p++;
    switch (c) {
    case '"': case '\\': case '/': *o++ = c; break;
    case 'b': *o++ = '\b'; break;
    case 'f': *o++ = '\f'; break;
    case 'n': *o++ = '\n'; break;
    case 'r': *o++ = '\r'; break;
    case 't': *o++ = '\t'; break;
    case 'u': {
      if (ps->end - ps->p < 4) return NULL;
      unsigned v = 0;
      for (int i = 0; i < 4; i++) {
        int h = hexv(ps->p[i]);
        if (h < 0) return NULL;
        v = v * 16 + (unsigned)h;
      }
      ps->p += 4;
      if (v < 0x80) *o++ = (char)v;
      else if (v < 0x800) *o++ = (char)(0xC0 | (v >> 6)), *o++ = (char)(0x80 | (v & 63));
      else *o++ = (char)(0xE0 | (v >> 12)), *o++ = (char)(0x80 | ((v >> 6) & 63)), *o++ = (char)(0x80 | (v & 63));
      break;
    }
    default: return NULL;
    }
  }
  if (ps->p >= ps->end) return NULL;
  ps->p++;
  *o = 0;
  return out;
}

static dj_node *parse_value(parser *ps, int depth) {
  ws(ps);
  if (ps->p >= ps->end || depth > DJ_MAX_DEPTH) return NULL;
  dj_node *nd = take(ps, sizeof *nd);
  if (!nd) return NULL;
  char c = *ps->p;
  if (c == '{' || c == '[') {
    int obj = c == '{';
    nd->type = obj ? DJ_OBJ : DJ_ARR;
    ps->p++;
    ws(ps);
    dj_node **tail = &nd->child;
    if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) { ps->p++; return nd; }
    for (;;) {
      char *key = NULL;
      if (obj) {
        ws(ps);
        if (!(key = parse_string(ps))) return NULL;
        ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') return NULL;
        ps->p++;
      }
      dj_node *v = parse_value(ps, depth + 1);
      if (!v) return NULL;
      v->key = key;
      *tail = v;
      tail = &v->next;
      ws(ps);
      if (ps->p >= ps->end) return NULL;
      if (*ps->p == ',') { ps->p++; continue; }
      if (*ps->p == (obj ? '}' : ']')) { ps->p++; return nd; }
      return NULL;
    }
  }
  if (c == '"') {
    nd->type = DJ_STR;
    return (nd->str = parse_string(ps)) ? nd : NULL;
  }
  static const struct { const char *w; int t; } words[] = {{"true", DJ_TRUE}, {"false", DJ_FALSE}, {"null", DJ_NULL}};
  for (int i = 0; i < 3; i++) {
    size_t l = strlen(words[i].w);
    if ((size_t)(ps->end - ps->p) >= l && memcmp(ps->p, words[i].w, l) == 0) {
      ps->p += l;
      nd->type = words[i].t;
      return nd;
    }
  }
  char buf[64];
  size_t k = 0;
  while (ps->p < ps->end && k < sizeof buf - 1 && strchr("+-0123456789.eE", *ps->p)) buf[k++] = *ps->p++;
  buf[k] = 0;
  char *endp;
  if (k == 0) return NULL;
  nd->num = strtod(buf, &endp);
  if (*endp) return NULL;
  nd->type = DJ_NUM;
  return nd;
}

int dj_parse(const char *text, size_t n, dj_doc *doc, char *err, size_t errn) {
  parser ps = {text, text + n, NULL, 0, 0, err, errn};
  ps.cap = n * 4 + 4096 + (n / 2 + 16) * sizeof(dj_node);
  ps.mem = malloc(ps.cap);
  doc->root = NULL;
  doc->mem = ps.mem;
  if (!ps.mem) {
    if (err && errn) snprintf(err, errn, "out of memory");
    return -1;
  }
  dj_node *r = parse_value(&ps, 0);
  if (r) ws(&ps);
  if (!r || ps.p != ps.end) {
    if (err && errn) snprintf(err, errn, "not valid JSON (near byte %ld)", (long)(ps.p - text));
    free(ps.mem);
    doc->mem = NULL;
    return -1;
  }
  doc->root = r;
  return 0;
}

void dj_free(dj_doc *doc) {
  free(doc->mem);
  doc->mem = NULL;
  doc->root = NULL;
}

const dj_node *dj_get(const dj_node *obj, const char *key) {
  if (!obj || obj->type != DJ_OBJ) return NULL;
  const dj_node *r = NULL;
  for (const dj_node *c = obj->child; c; c = c->next)
    if (c->key && strcmp(c->key, key) == 0) r = c;   /* the last one wins */
  return r;
}

const char *dj_str(const dj_node *obj, const char *key) {
  const dj_node *v = dj_get(obj, key);
  return v && v->type == DJ_STR ? v->str : NULL;
}

double dj_num(const dj_node *obj, const char *key, double dflt) {
  const dj_node *v = dj_get(obj, key);
  return v && v->type == DJ_NUM ? v->num : dflt;
}

int dj_bool(const dj_node *obj, const char *key, int dflt) {
  const dj_node *v = dj_get(obj, key);
  if (!v) return dflt;
  return v->type == DJ_TRUE || (v->type == DJ_NUM && v->num != 0);
}

int dj_len(const dj_node *arr) {
  int n = 0;
  if (!arr || (arr->type != DJ_ARR && arr->type != DJ_OBJ)) return -1;
  for (const dj_node *c = arr->child; c; c = c->next) n++;
  return n;
}

const dj_node *dj_at(const dj_node *arr, int i) {
  if (!arr || arr->type != DJ_ARR) return NULL;
  const dj_node *c = arr->child;
  while (c && i-- > 0) c = c->next;
  return c;
}

void dj_put_str(char *buf, size_t cap, size_t *len, const char *s) {
  size_t n = *len;
#define PUT(ch) do { if (n + 1 < cap) buf[n] = (ch); n++; } while (0)
  PUT('"');
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (*p == '"' || *p == '\\') { PUT('\\'); PUT((char)*p); }
    else if (*p == '\n') { PUT('\\'); PUT('n'); }
    else if (*p < 0x20 || *p >= 0x7f) {
      char hx[8];
      snprintf(hx, sizeof hx, "\\u%04x", *p < 0x80 ? *p : '?');
      for (int i = 0; hx[i]; i++) PUT(hx[i]);
    } else PUT((char)*p);
  }
  PUT('"');
#undef PUT
  if (n < cap) buf[n] = 0;
  else if (cap) buf[cap - 1] = 0;
  *len = n;
}
