/* ob_http.h -- HTTP transfers on an engine's loop: libcurl's multi interface
 * driven by libuv (ob_http.c).
 *
 * One ob_http per engine, made at its first request: multi handles (CURLM,
 * 64 transfers each, made as more run at once) whose sockets libuv polls (a
 * uv_poll_t per socket libcurl asks to watch) and whose timeouts a
 * uv_timer_t each keeps, so that thousands of transfers wait at once on the
 * loop that runs everything else, and no thread of ours blocks. At most
 * ob_http_set_max transfers are handed to libcurl at once; the others wait
 * in order. Connections are kept by each multi handle and reused by later
 * transfers to the same host; DNS answers and TLS session tickets are
 * shared through a CURLSH; ended transfers' easy handles are reused.
 *
 * A transfer ends once: its callback is called from the loop with the
 * response (or the transport failure), or it is cancelled first and its
 * callback is never called. Freeing the ob_http cancels every transfer left.
 *
 * Costs: nothing for an engine that never makes a request; per transfer
 * waiting its turn, its request; per transfer handed over, an easy handle
 * and the answer's bytes; per socket, a uv_poll_t. */
#ifndef OB_HTTP_H
#define OB_HTTP_H

#include <stddef.h>
#include <uv.h>

#include "ob_value.h" /* ob_buf */
#include "ob_error.h"

typedef struct ob_http ob_http;
typedef struct ob_http_xfer ob_http_xfer;

typedef struct ob_http_request {
  const char *method;     /* "GET" when NULL */
  const char *url;
  const char *const *headers; /* "Name: value" lines */
  size_t nheaders;
  const char *body;       /* sent when has_body (any method) */
  size_t body_len;
  int has_body;
  unsigned long timeout_ms; /* the whole transfer; 0: none */
  int follow;             /* follow redirects (at most 20) */
  size_t max_bytes;       /* the largest answer body taken; 0: no limit */
  const char *ca_file;    /* trust these CAs (PEM) instead of the system's; NULL */
  const char *download;   /* write the body to this file instead of memory; NULL */
} ob_http_request;

typedef struct ob_http_response {
  const char *error;      /* NULL, or the transport failure: "GET URL: why" */
  long status;            /* the last answer's status (after redirects) */
  size_t nheaders;        /* its header lines, names in lower case */
  const char *const *names, *const *values;
  const char *body;       /* NULL for a download */
  size_t body_len;        /* bytes received (written to the file, for a download) */
  const char *url;        /* where the answer came from (after redirects) */
  const char *version;    /* the HTTP version it came in: "1.0", "1.1", "2", "3" */
} ob_http_response;

/* Called once per transfer that is not cancelled, from the loop. The
 * response is valid during the call only. */
typedef void (*ob_http_cb)(void *ud, const ob_http_response *res);

/* The engine's HTTP client on loop. NULL with err when libcurl cannot start.
 * The first one raises the process's soft limit of open files to its hard
 * limit (10,000 transfers at once need as many sockets), saying so on stderr
 * when it cannot. */
ob_http *ob_http_new(uv_loop_t *loop, ob_error *err);
/* Cancels every transfer (no callback), and closes the handles: their memory
 * goes once the loop has turned (uv_close). */
void ob_http_free(ob_http *h);

/* Starts a transfer; NULL with err (the method and URL named) when it cannot
 * start (a bad option, out of memory, a download file that cannot be made). */
ob_http_xfer *ob_http_start(ob_http *h, const ob_http_request *rq, ob_http_cb cb, void *ud,
                            ob_error *err);
/* Ends a transfer that has not called back: its callback is never called. */
void ob_http_cancel(ob_http_xfer *x);
/* Transfers in flight (queued included). */
size_t ob_http_active(const ob_http *h);

/* Transfers handed to libcurl at once, at most; the others wait their turn
 * in the order they were started (their timeout_ms counts from their turn).
 * Every transfer in flight holds a connection (a socket) until libcurl can
 * reuse one, and libcurl's work per event grows with how many it holds:
 * 10,000 GETs of a 1 KB file from a local nginx (bench/http.lua, medians of 5
 * interleaved rounds in one run) make 12,200 requests/s at 1,000 at once,
 * 15,200 at 200, 16,700 at 100 and 17,900 at 50; all at once is 3 times slower
 * than 1,000. 100, as aiohttp's connector: near the best for one fast host,
 * and a polite ceiling for a remote API (raise it for slow ones).
 * 0: the default. `obelus run --http-max N`. */
#define OB_HTTP_MAX_DEFAULT 100
void ob_http_set_max(ob_http *h, size_t max);

#endif
