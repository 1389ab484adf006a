/*
** fuzz_tracker.c -- libFuzzer target: the tracker's state (rpc/tracker.c) fed
** arbitrary bytes on several connections, without sockets.
**
** Input: byte 0 picks the options (auth key or none); then records of one
** command byte and, for input, one length byte and that many bytes: input to
** connection 0..2, close and reopen a connection, drain part of an output
** queue, advance the clock and expire, or ask for the SUMMARY. Checked on
** every step: the SUMMARY is JSON within one frame; an output queue never
** holds more than max_out plus one reply.
*/
#include <jansson.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rpc.h"

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) {
  if (n < 1) return 0;
  rpc_tracker_opts o;
  rpc_tracker_opts_default(&o);
  o.auth_key = (d[0] & 1) ? "fuzzkey" : NULL;
  o.stop_key = "stop";
  o.max_conns = 4;
  o.max_per_peer = 3;
  o.max_entries = 8;
  o.max_out = 1 << 16;
  rpc_tracker *t = rpc_tracker_new(&o);
  static const char *peers[3] = {"10.0.0.1", "10.0.0.2", "10.0.0.1"};
  int ids[3];
  double now = 0;
  for (int i = 0; i < 3; i++) ids[i] = rpc_tracker_conn_open(t, -1, peers[i], now);
  size_t i = 1;
  while (i < n && !rpc_tracker_stopped(t)) {
    uint8_t cmd = d[i++];
    int c = cmd % 3;
    switch ((cmd / 3) % 6) {
    case 0:
    case 1: {   /* input */
      size_t len = i < n ? d[i++] : 0;
      if (len > n - i) len = n - i;
      if (ids[c] && rpc_tracker_conn_input(t, ids[c], d + i, len, now) != 0) {
        rpc_tracker_conn_close(t, ids[c]);
        ids[c] = 0;
      }
      i += len;
      break;
    }
    case 2:   /* close and reopen */
      if (ids[c]) rpc_tracker_conn_close(t, ids[c]);
      ids[c] = rpc_tracker_conn_open(t, -1, peers[c], now);
      break;
    case 3: {   /* the peer reads part of its replies */
      size_t k = 0;
      if (ids[c] && rpc_tracker_conn_output(t, ids[c], &k)) {
        if (k > o.max_out + RPC_TRACKER_MAX_FRAME + 8) abort();
        rpc_tracker_conn_sent(t, ids[c], k / 2 + 1);
      }
      break;
    }
    case 4:   /* time passes */
      now += (cmd & 0x80) ? 200 : 1;
      rpc_tracker_expire(t, now);
      for (int k = 0; k < 3; k++)   /* ids that expired are gone: reopen later */
        if (ids[k] && rpc_tracker_conn_input(t, ids[k], "", 0, now) != 0) {
          rpc_tracker_conn_close(t, ids[k]);
          ids[k] = 0;
        }
      break;
    default: {
      char *s = rpc_tracker_summary_text(t);
      if (!s || strlen(s) > RPC_TRACKER_MAX_FRAME) abort();
      json_t *j = json_loads(s, JSON_DECODE_ANY, NULL);
      if (!j || !json_is_object(json_array_get(j, 1))) abort();
      json_decref(j);
      free(s);
    }
    }
  }
  rpc_tracker_free(t);
  return 0;
}
