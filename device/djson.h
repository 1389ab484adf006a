/*
** djson.h -- the device side's small JSON reader (device/djson.c): a request
** header or a kernel signature parsed into a tree of nodes in one arena.
** Plain C, no dependencies (the device programs link no JSON library).
*/
#ifndef TL_DJSON_H
#define TL_DJSON_H

#include <stddef.h>
#include <stdint.h>

enum { DJ_NULL, DJ_FALSE, DJ_TRUE, DJ_NUM, DJ_STR, DJ_ARR, DJ_OBJ };

typedef struct dj_node {
  int type;
  double num;
  char *str;                   /* DJ_STR: the decoded string; DJ_OBJ member: its key */
  struct dj_node *child, *next; /* DJ_ARR / DJ_OBJ: first element; siblings */
  char *key;                   /* the member's key inside an object */
} dj_node;

typedef struct dj_doc {
  dj_node *root;
  void *mem;                   /* one block holding every node and string */
} dj_doc;

/* Parse text[0..n): 0, or -1 with a message in err (errn bytes). */
int dj_parse(const char *text, size_t n, dj_doc *doc, char *err, size_t errn);
void dj_free(dj_doc *doc);

const dj_node *dj_get(const dj_node *obj, const char *key);
const char *dj_str(const dj_node *obj, const char *key);              /* NULL if absent */
double dj_num(const dj_node *obj, const char *key, double dflt);
int dj_bool(const dj_node *obj, const char *key, int dflt);
int dj_len(const dj_node *arr);
const dj_node *dj_at(const dj_node *arr, int i);

/* Append s as a JSON string literal (quoted, escaped) to buf[*len..cap). */
void dj_put_str(char *buf, size_t cap, size_t *len, const char *s);

#endif
