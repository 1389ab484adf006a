/*
** tracker.c -- the RPC tracker: TVM's tracker wire protocol (formats §3), so
** TVM's own servers and query tool can talk to it.
**
** One thread, one poll() loop over the listening socket and every connection.
** A connection first sends the 4-byte magic (answered with the same), then
** int32-length-prefixed JSON frames, each answered with one frame (REQUEST
** is answered when a server is assigned). Per rpc key: a FIFO of free servers
** (each PUT appends one) and the waiting requests, served best priority
** first, FIFO within a priority. A connection that closes (EOF, reset, or a
** dead peer caught by TCP keepalive) takes its free entries and its waiting
** requests with it, so a vanished server is never handed out. A malformed or
** oversized frame, or an unknown code, closes that connection only.
*/
#define _GNU_SOURCE
#include "rpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TRACKER_MAX_CONNS 1024

typedef struct {
  int fd;
  int id;
  char peer[64];
  int ready;                 /* magic exchanged */
  char *buf;
  size_t n, cap;
  json_t *info;              /* object: UPDATE_INFO merged */
  json_t *pending;           /* array of match keys not yet handed out */
  int dead;
} tconn;

typedef struct {
  int conn_id;
  char *host;
  int port;
  char *match_key;
} tfree;

typedef struct {
  int conn_id;
  int priority;
  long seq;
} treq;

typedef struct {
  char *key;
  tfree *fr;
  int nfr, capfr;
  treq *rq;
  int nrq, caprq;
} tqueue;

typedef struct {
  tconn *conns[TRACKER_MAX_CONNS];
  int nconns;
  int next_id;
  long seq;
  tqueue *qs;
  int nq, capq;
  char stop_key[40];
  int stop;
  int verbose;
} tracker;

static tconn *find_conn(tracker *t, int id) {
  for (int i = 0; i < t->nconns; i++)
    if (t->conns[i]->id == id && !t->conns[i]->dead) return t->conns[i];
  return NULL;
}

static tqueue *queue_of(tracker *t, const char *key, int create) {
  for (int i = 0; i < t->nq; i++)
    if (!strcmp(t->qs[i].key, key)) return &t->qs[i];
  if (!create) return NULL;
  if (t->nq == t->capq) {
    t->capq = t->capq ? t->capq * 2 : 8;
    t->qs = tl_realloc(t->qs, sizeof *t->qs * (size_t)t->capq);
  }
  tqueue *q = &t->qs[t->nq++];
  memset(q, 0, sizeof *q);
  q->key = tl_strdup(key);
  return q;
}

static int send_text(tconn *c, const char *text) {
  tl_ctx *ctx = tl_ctx_new();
  int rc = rpc_send_json(ctx, c->fd, text, tl_now() + 2.0);
  tl_ctx_free(ctx);
  if (rc) c->dead = 1;
  return rc;
}

static int send_magic(tconn *c) {
  tl_ctx *ctx = tl_ctx_new();
  int rc = rpc_send_i32(ctx, c->fd, RPC_TRACKER_MAGIC, tl_now() + 2.0);
  tl_ctx_free(ctx);
  if (rc) c->dead = 1;
  return rc;
}

static int send_json(tconn *c, json_t *j) {
  char *s = json_dumps(j, RPC_TRACKER_JSON);
  json_decref(j);
  int rc = send_text(c, s ? s : "-1");
  free(s);
  return rc;
}

static void pending_remove(tconn *c, const char *mk) {
  for (size_t i = 0; i < json_array_size(c->pending); i++) {
    if (!strcmp(json_string_value(json_array_get(c->pending, i)), mk)) {
      json_array_remove(c->pending, i);
      return;
    }
  }
}

/* Pair free servers with waiting requests (formats §3.6). */
static void schedule(tracker *t, tqueue *q) {
  while (q->nfr > 0 && q->nrq > 0) {
    int best = 0;
    for (int i = 1; i < q->nrq; i++)
      if (q->rq[i].priority > q->rq[best].priority ||
          (q->rq[i].priority == q->rq[best].priority && q->rq[i].seq < q->rq[best].seq))
        best = i;
    treq r = q->rq[best];
    memmove(&q->rq[best], &q->rq[best + 1], sizeof(treq) * (size_t)(q->nrq - best - 1));
    q->nrq--;
    tfree f = q->fr[0];
    memmove(&q->fr[0], &q->fr[1], sizeof(tfree) * (size_t)(q->nfr - 1));
    q->nfr--;
    tconn *rc = find_conn(t, r.conn_id);
    int ok = 0;
    if (rc) {
      json_t *j = json_pack("[i, [s, i, s]]", 0, f.host, f.port, f.match_key);
      ok = send_json(rc, j) == 0;
    }
    if (ok) {
      tconn *sc = find_conn(t, f.conn_id);
      if (sc) pending_remove(sc, f.match_key);
      if (t->verbose)
        fprintf(stderr, "tracker: %s:%d (%s) -> %s\n", f.host, f.port, f.match_key, rc->peer);
      free(f.host);
      free(f.match_key);
    } else {   /* requester gone: the server goes back at the end */
      q->fr[q->nfr++] = f;
    }
  }
}

static void drop_conn_entries(tracker *t, tconn *c) {
  int has_key = c->info && json_object_get(c->info, "key");
  for (int i = 0; i < t->nq; i++) {
    tqueue *q = &t->qs[i];
    int k = 0;
    for (int j = 0; j < q->nrq; j++)
      if (q->rq[j].conn_id != c->id) q->rq[k++] = q->rq[j];
    q->nrq = k;
    if (!has_key) continue;
    k = 0;
    for (int j = 0; j < q->nfr; j++) {
      if (q->fr[j].conn_id == c->id) {
        free(q->fr[j].host);
        free(q->fr[j].match_key);
      } else {
        q->fr[k++] = q->fr[j];
      }
    }
    q->nfr = k;
  }
}

static void close_conn(tracker *t, int idx) {
  tconn *c = t->conns[idx];
  drop_conn_entries(t, c);
  if (t->verbose && c->info) {
    char *s = json_dumps(c->info, JSON_COMPACT);
    fprintf(stderr, "tracker: connection %s closed %s\n", c->peer, s ? s : "");
    free(s);
  }
  close(c->fd);
  free(c->buf);
  json_decref(c->info);
  json_decref(c->pending);
  free(c);
  t->conns[idx] = t->conns[--t->nconns];
}

static json_t *summary(tracker *t) {
  json_t *qi = json_object();
  for (int i = 0; i < t->nq; i++)
    json_object_set_new(qi, t->qs[i].key,
                        json_pack("{s:i, s:i}", "free", t->qs[i].nfr, "pending", t->qs[i].nrq));
  json_t *si = json_array();
  for (int i = 0; i < t->nconns; i++) {
    tconn *c = t->conns[i];
    const char *k = c->info ? json_string_value(json_object_get(c->info, "key")) : NULL;
    if (k && !strncmp(k, "server", 6)) json_array_append(si, c->info);
  }
  return json_pack("[i, {s:o, s:o}]", 0, "queue_info", qi, "server_info", si);
}

/* Handle one frame; returns -1 to close the connection. */
static int handle(tracker *t, tconn *c, const char *text, size_t n) {
  json_t *j = json_loadb(text, n, JSON_DECODE_ANY, NULL);
  if (!j || !json_is_array(j) || !json_is_integer(json_array_get(j, 0))) {
    if (t->verbose) fprintf(stderr, "tracker: malformed message from %s, closing\n", c->peer);
    json_decref(j);
    return -1;
  }
  int code = (int)json_integer_value(json_array_get(j, 0));
  int rc = 0;
  switch (code) {
  case TC_PING:
    rc = send_text(c, "0");
    break;
  case TC_STOP: {
    const char *k = json_string_value(json_array_get(j, 1));
    if (k && !strcmp(k, t->stop_key)) {
      send_text(c, "0");
      t->stop = 1;
    } else {
      rc = send_text(c, "-1");
    }
    break;
  }
  case TC_PUT: {
    const char *key = json_string_value(json_array_get(j, 1));
    json_t *pm = json_array_get(j, 2);
    json_t *pj = json_array_get(pm, 0);
    const char *mk = json_string_value(json_array_get(pm, 1));
    const char *addr = json_string_value(json_array_get(j, 3));
    int port = json_is_integer(pj) ? (int)json_integer_value(pj)
               : json_is_string(pj) ? atoi(json_string_value(pj)) : -1;
    if (!key || !mk || port < 0 || port > 65535) {
      rc = -1;
      break;
    }
    tqueue *q = queue_of(t, key, 1);
    if (q->nfr == q->capfr) {
      q->capfr = q->capfr ? q->capfr * 2 : 8;
      q->fr = tl_realloc(q->fr, sizeof(tfree) * (size_t)q->capfr);
    }
    q->fr[q->nfr++] = (tfree){c->id, tl_strdup(addr ? addr : c->peer), port, tl_strdup(mk)};
    json_array_append_new(c->pending, json_string(mk));
    rc = send_text(c, "0");
    schedule(t, q);
    break;
  }
  case TC_REQUEST: {
    const char *key = json_string_value(json_array_get(j, 1));
    json_t *pr = json_array_get(j, 3);
    if (!key) {
      rc = -1;
      break;
    }
    tqueue *q = queue_of(t, key, 1);
    if (q->nrq == q->caprq) {
      q->caprq = q->caprq ? q->caprq * 2 : 8;
      q->rq = tl_realloc(q->rq, sizeof(treq) * (size_t)q->caprq);
    }
    q->rq[q->nrq++] = (treq){c->id, json_is_integer(pr) ? (int)json_integer_value(pr) : 1, t->seq++};
    schedule(t, q);
    break;
  }
  case TC_UPDATE_INFO: {
    json_t *d = json_array_get(j, 1);
    if (!json_is_object(d)) {
      rc = -1;
      break;
    }
    if (!c->info) c->info = json_object();
    json_object_update(c->info, d);
    json_t *addr = json_object_get(c->info, "addr");
    if (json_is_array(addr) && json_is_null(json_array_get(addr, 0)))
      json_array_set_new(addr, 0, json_string(c->peer));
    rc = send_text(c, "0");
    break;
  }
  case TC_SUMMARY:
    rc = send_json(c, summary(t));
    break;
  case TC_GET_PENDING_MATCHKEYS:
    rc = send_json(c, json_incref(c->pending));
    break;
  default:
    if (t->verbose) fprintf(stderr, "tracker: unknown code %d from %s, closing\n", code, c->peer);
    rc = -1;
  }
  json_decref(j);
  return rc ? -1 : 0;
}

/* Read what is there and handle complete frames; -1 closes. */
static int on_readable(tracker *t, tconn *c) {
  if (c->cap - c->n < 65536) {
    c->cap = c->cap ? c->cap * 2 : 65536;
    if (c->cap > RPC_TRACKER_MAX_FRAME + 65536 * 2) return -1;
    c->buf = tl_realloc(c->buf, c->cap);
  }
  ssize_t r = recv(c->fd, c->buf + c->n, c->cap - c->n, MSG_DONTWAIT);
  if (r == 0) return -1;
  if (r < 0) return (errno == EAGAIN || errno == EINTR) ? 0 : -1;
  c->n += (size_t)r;
  size_t off = 0;
  for (;;) {
    size_t left = c->n - off;
    if (!c->ready) {
      if (left < 4) break;
      int32_t m;
      memcpy(&m, c->buf + off, 4);
      if (m != RPC_TRACKER_MAGIC) return -1;
      off += 4;
      if (send_magic(c) != 0) return -1;
      c->ready = 1;
      continue;
    }
    if (left < 4) break;
    int32_t len;
    memcpy(&len, c->buf + off, 4);
    if (len < 0 || (size_t)len > RPC_TRACKER_MAX_FRAME) return -1;
    if (left < 4 + (size_t)len) break;
    if (handle(t, c, c->buf + off + 4, (size_t)len)) return -1;
    off += 4 + (size_t)len;
    if (t->stop) break;
  }
  memmove(c->buf, c->buf + off, c->n - off);
  c->n -= off;
  return c->dead ? -1 : 0;
}

TL_EXPORT int tl_rpc_tracker_run(tl_ctx *ctx, const char *host, int port, int port_end,
                                 const char *stop_key, int verbose) {
  int lfd, bound;
  int rc = rpc_listen(ctx, host, port, port_end, &lfd, &bound);
  if (rc) return rc;
  signal(SIGPIPE, SIG_IGN);
  tracker *t = tl_calloc(1, sizeof *t);
  t->verbose = verbose;
  if (stop_key && *stop_key) {
    snprintf(t->stop_key, sizeof t->stop_key, "%s", stop_key);
  } else {
    unsigned long long r = tl_hash_bytes(&t, sizeof t, (uint64_t)(tl_now() * 1e9));
    snprintf(t->stop_key, sizeof t->stop_key, "%016llx", r);
  }
  printf("bind to %s:%d\n", host && *host ? host : "0.0.0.0", bound);
  fflush(stdout);
  struct pollfd *pf = tl_calloc(TRACKER_MAX_CONNS + 1, sizeof *pf);
  while (!t->stop) {
    pf[0] = (struct pollfd){lfd, POLLIN, 0};
    for (int i = 0; i < t->nconns; i++) pf[i + 1] = (struct pollfd){t->conns[i]->fd, POLLIN, 0};
    int nfds = t->nconns + 1;
    int pr = poll(pf, (nfds_t)nfds, 1000);
    if (pr < 0) {
      if (errno == EINTR) continue;
      break;
    }
    /* connections first (indices are stable until we close) */
    for (int i = nfds - 2; i >= 0; i--) {
      if (!pf[i + 1].revents) continue;
      tconn *c = t->conns[i];
      if (on_readable(t, c) != 0 || c->dead) close_conn(t, i);
      if (t->stop) break;
    }
    /* requesters that died while a send failed: sweep */
    for (int i = t->nconns - 1; i >= 0; i--)
      if (t->conns[i]->dead) close_conn(t, i);
    if (pf[0].revents & POLLIN) {
      struct sockaddr_in sa;
      socklen_t sl = sizeof sa;
      int fd = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC);
      if (fd >= 0) {
        if (t->nconns >= TRACKER_MAX_CONNS) {
          close(fd);
        } else {
          rpc_keepalive(fd);
          tconn *c = tl_calloc(1, sizeof *c);
          c->fd = fd;
          c->id = ++t->next_id;
          inet_ntop(AF_INET, &sa.sin_addr, c->peer, sizeof c->peer);
          c->pending = json_array();
          t->conns[t->nconns++] = c;
        }
      }
    }
  }
  while (t->nconns) close_conn(t, t->nconns - 1);
  for (int i = 0; i < t->nq; i++) {
    for (int j = 0; j < t->qs[i].nfr; j++) {
      free(t->qs[i].fr[j].host);
      free(t->qs[i].fr[j].match_key);
    }
    free(t->qs[i].fr);
    free(t->qs[i].rq);
    free(t->qs[i].key);
  }
  free(t->qs);
  free(t);
  free(pf);
  close(lfd);
  return TL_OK;
}
