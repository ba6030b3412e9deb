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

#include "base/ob_value.h" /* ob_buf */
#include "base/ob_error.h"
#include "base/ob_mem.h"

typedef struct ob_http ob_http;
typedef struct ob_http_xfer ob_http_xfer;

typedef struct ob_http_request {
  const char *method;     /* "GET" when NULL; an HTTP token (RFC 9110's tchar) */
  const char *url;        /* http:// or https://; no space, CR, LF (nor control byte) */
  const char *const *headers; /* "Name: value" lines: the name a token, no CR or LF */
  size_t nheaders;
  const char *body;       /* sent when has_body (any method) */
  size_t body_len;
  int has_body;
  unsigned long timeout_ms; /* the whole transfer; 0: OB_HTTP_TIMEOUT_DEFAULT */
  int follow;             /* follow redirects (at most OB_HTTP_MAX_REDIRECTS, to
                             http and https only) */
  size_t max_bytes;       /* the largest answer body taken, counted decoded (gzip):
                             0: the client's (ob_http_set_max_bytes) */
  const char *ca_file;    /* trust these CAs (PEM) instead of the system's; NULL */
  const char *download;   /* write the body to this file instead of memory; NULL */
  unsigned long low_speed_limit; /* bytes/s: slower than this for low_speed_time */
  unsigned long low_speed_time;  /* seconds, and the transfer fails; 0: the defaults */
} ob_http_request;

/* What a request that leaves them at 0 gets. Each is a limit on what a server
 * can make a call wait for or hold: a server that answers a byte at a time,
 * or never ends, or sends a gzip bomb fails the call instead of holding it
 * (or the process's memory) forever.
 * - 300 s for the whole transfer: an LLM's long answer takes a minute or two;
 * - under 1 byte/s for 60 s: a server that sends nothing (a minute, not 30 s:
 *   an API may think a long time before its first byte, and this counts then);
 * - 64 MB of body (decoded): far above an API's answer, far below the memory
 *   of a machine running many calls at once (`--http-max-bytes`). */
#define OB_HTTP_TIMEOUT_DEFAULT 300000ul
#define OB_HTTP_LOW_SPEED_LIMIT_DEFAULT 1ul
#define OB_HTTP_LOW_SPEED_TIME_DEFAULT 60ul
#define OB_HTTP_MAX_BYTES_DEFAULT ((size_t)64 << 20)
#define OB_HTTP_MAX_REDIRECTS 20

/* The settings a transfer of rq runs with, its 0s replaced by the
 * client's defaults (h may be NULL: the built-in ones): what the easy
 * handle is given. */
typedef struct ob_http_settings {
  unsigned long timeout_ms, low_speed_limit, low_speed_time;
  size_t max_bytes;
  int allow_private;
  long max_redirects;
} ob_http_settings;
void ob_http_settings_of(const ob_http *h, const ob_http_request *rq, ob_http_settings *out);

/* Checks a request before anything is sent: the method a token, the URL
 * http(s) with no space or control byte, each header "Name: value" with a
 * token for a name and no CR or LF. OB_OK, or OB_EINVAL with err naming
 * what is wrong (the bad text quoted with its control bytes escaped). */
int ob_http_check(const ob_http_request *rq, ob_error *err);
/* Whether s (len bytes) is an HTTP token: a method or a header name. */
int ob_http_is_token(const char *s, size_t len);
/* s (len bytes) for a message, in out (cap >= 100): quoted, control bytes
 * escaped (a CR or an escape sequence never reaches a terminal), cut past
 * 80 bytes. Returns out. */
const char *ob_http_quote(char *out, size_t cap, const char *s, size_t len);

/* Whether an address may be connected to without --http-allow-private:
 * NULL when it may, else why not ("link-local", "cloud metadata", ...).
 * Denied: 0.0.0.0/8 and ::, link-local (169.254.0.0/16, fe80::/10: where
 * clouds serve their metadata and credentials), 100.100.100.200 and
 * fd00:ec2::254 (metadata), multicast, broadcast and reserved (224.0.0.0/3,
 * ff00::/8), and any of these inside an IPv6 address (::ffff:a.b.c.d,
 * 64:ff9b::a.b.c.d). Allowed: loopback (local services, and the tests'
 * servers) and private networks (10/8, 172.16/12, 192.168/16, fc00::/7:
 * an organisation's own APIs). sa is a struct sockaddr_in or _in6. */
const char *ob_http_denied(const void *sa);

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
 * limit (10,000 transfers at once need as many sockets); when it cannot,
 * ob_http_take_note says so. */
ob_http *ob_http_new(uv_loop_t *loop, ob_error *err);
/* The first call after the limit could not be raised: the text saying so ("http: cannot
 * raise the open files limit ..."), for the caller to say (the engine: a note "http");
 * else, and on every later call, NULL: it is said once in the process. */
const char *ob_http_take_note(void);
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
/* The body limit of requests that give none (0: OB_HTTP_MAX_BYTES_DEFAULT).
 * `obelus run --http-max-bytes N`. */
void ob_http_set_max_bytes(ob_http *h, size_t max_bytes);
/* Non-zero: connections to the addresses ob_http_denied names are allowed
 * too (`obelus run --http-allow-private`). For the transfers started after. */
void ob_http_set_allow_private(ob_http *h, int allow);
/* The memory account (ob_mem.h) the answers' bodies and header lines are
 * charged to while they are held (NULL: none); a transfer whose buffers would
 * pass its limit fails with "memory limit of N MB reached (--max-memory)". */
void ob_http_set_mem(ob_http *h, ob_mem *mem);

#endif
