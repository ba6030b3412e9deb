/* ob_httpd.c -- an HTTP server on a libuv loop the host owns.
 *
 * libwebsockets (its libuv event library, joining a foreign loop) parses HTTP and
 * writes it; this file turns its callbacks into one call of the host's handler per
 * request, with the request whole: method, path, arguments, the three headers the
 * UI's security needs (Origin, Authorization, Cookie; any other through
 * ob_httpd_header) and the body, read up to a bound (a larger one is answered 413, the
 * rest of it read and dropped, up to 16 MB or 5 s, and its connection closed: never
 * buffered). The handler answers at once: a status, a
 * type, a body and a header line or two, which are written as the connection takes
 * them (a chunk of 4 KB a writable callback), so a slow reader holds its own response
 * only. Or it makes the response a stream (ob_httpd_res_stream): the headers go
 * without a length, and the host sends more as it comes (Server-Sent Events); a
 * stream's queue is bounded, and a client that falls too far behind is cut off rather
 * than let grow the server's memory.
 *
 * Nothing here prints: the library's own log is off (its errors come back as ours).
 * The library is loaded when the first server starts (ob_lws.c), not linked.
 *
 * Costs: per connection, the library's struct and this file's session (the request's
 * strings, its body, the response until written); per stream, its queue; no thread. */
#include <arpa/inet.h>
#include <errno.h>
#include <libwebsockets.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/ob_mem.h"
#include "io/ob_httpd.h"
#include "io/ob_lws.h"

#define HTTPD_CHUNK 1048576 /* a response's bytes written at a writable callback: each turn
                             costs the loop a poll change (a run's detail may be 40 MB) */
#define HTTPD_HEADERS_ROOM 5120 /* a response's headers at most (its extra lines: 512) */
#define HTTPD_STREAM_CHUNK 262144 /* a stream's: the events of a busy run come in bulk, to
                                     each of its viewers */
#define HTTPD_MAX_BODY ((size_t)1 << 20)
/* A body past its bound: after the 413, at most this much more of it is read and dropped
 * (for at most DRAIN_S seconds) before the connection closes. Closed with the body
 * unread, the socket would send a reset, which can reach the client before it has read
 * the 413: it then sees the connection fail, not the answer. */
#define HTTPD_DRAIN_MAX ((size_t)16 << 20)
#define HTTPD_DRAIN_S 5
#define HTTPD_MAX_QUEUED ((size_t)16 << 20) /* a stream's client this far behind is cut off */

struct ob_httpd_stream {
  struct lws *wsi;  /* NULL until the handler has returned */
  ob_buf out;       /* queued bytes, out.data + sent onwards not yet written */
  size_t sent;
  int ended, cut;
  ob_httpd_gone gone;
  void *ud;
};

struct ob_httpd {
  struct lws_context *ctx; /* NULL once the library has let go of it (its pcontext) */
  struct lws_vhost *vh;
  int closing;
  ob_httpd_config cfg;
  int port;
  int fd;                  /* the listening socket, ours: accepted ones go to the library */
  uv_poll_t poll;
  int polling;
};

/* A connection's transaction: the request as read, then the response as written. */
typedef struct session {
  char *method, *path, *query, *origin, *auth, *cookie;
  ob_buf body;
  int too_big;
  int status;
  char *ctype;
  char extra[512];
  ob_buf out;   /* the response's body */
  size_t sent;
  int headers_done, responding;
  ob_httpd_stream *stream; /* the response is a stream */
  int body_ended;  /* a body past its bound came to its end (before the 413 was out) */
  int draining;    /* the 413 is out: the rest of the body is read and dropped */
  size_t drained;
} session;

static void session_clear(session *s) {
  if (s->stream) { /* the client left, or the stream ended: the host lets go */
    ob_httpd_stream *st = s->stream;
    st->wsi = NULL;
    ob_buf_free(&st->out);
    if (st->gone)
      st->gone(st->ud);
    free(st);
  }
  free(s->method);
  free(s->path);
  free(s->query);
  free(s->origin);
  free(s->auth);
  free(s->cookie);
  free(s->ctype);
  ob_buf_free(&s->body);
  ob_buf_free(&s->out);
  memset(s, 0, sizeof *s);
}

/* A header's value (all its fragments), or NULL when absent. */
static char *header(struct lws *wsi, enum lws_token_indexes t) {
  int n = lws_hdr_total_length(wsi, t);
  if (n <= 0)
    return NULL;
  char *s = ob_xmalloc((size_t)n + 1);
  if (lws_hdr_copy(wsi, s, n + 1, t) < 0) {
    free(s);
    return NULL;
  }
  return s;
}

/* The URL's arguments, each fragment joined by '&' as sent. */
static char *query(struct lws *wsi) {
  ob_buf b;
  ob_buf_init(&b);
  char frag[1024];
  for (int k = 0;; k++) {
    int n = lws_hdr_copy_fragment(wsi, frag, sizeof frag, WSI_TOKEN_HTTP_URI_ARGS, k);
    if (n < 0)
      break;
    if (b.len)
      ob_buf_addc(&b, '&');
    ob_buf_add(&b, frag, (size_t)n);
  }
  ob_buf_addc(&b, '\0');
  return b.data;
}

static int respond(struct lws *wsi, session *s) {
  s->responding = 1;
  lws_callback_on_writable(wsi);
  return 0;
}

int ob_httpd_header(const ob_httpd_req *req, const char *name, char *buf, size_t size) {
  char key[64];
  size_t n = strlen(name);
  if (!req->conn || n + 2 > sizeof key || size == 0)
    return -1;
  for (size_t i = 0; i < n; i++) /* the library keeps them lower case, with the colon */
    key[i] = (char)(name[i] >= 'A' && name[i] <= 'Z' ? name[i] + 32 : name[i]);
  key[n] = ':';
  key[n + 1] = '\0';
  struct lws *wsi = req->conn;
  static const struct { const char *name; enum lws_token_indexes t; } known[] = {
      {"accept:", WSI_TOKEN_HTTP_ACCEPT},     {"content-type:", WSI_TOKEN_HTTP_CONTENT_TYPE},
      {"origin:", WSI_TOKEN_ORIGIN},          {"authorization:", WSI_TOKEN_HTTP_AUTHORIZATION},
      {"cookie:", WSI_TOKEN_HTTP_COOKIE},     {"host:", WSI_TOKEN_HOST},
      {"user-agent:", WSI_TOKEN_HTTP_USER_AGENT}, {"referer:", WSI_TOKEN_HTTP_REFERER},
      {"accept-encoding:", WSI_TOKEN_HTTP_ACCEPT_ENCODING},
  };
  for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
    if (strcmp(key, known[i].name) != 0)
      continue;
    int len = lws_hdr_total_length(wsi, known[i].t);
    if (len <= 0 || (size_t)len >= size)
      return -1;
    return lws_hdr_copy(wsi, buf, (int)size, known[i].t) < 0 ? -1 : len;
  }
  int len = lws_hdr_custom_length(wsi, key, (int)n + 1);
  if (len < 0 || (size_t)len >= size)
    return -1;
  return lws_hdr_custom_copy(wsi, buf, (int)size, key, (int)n + 1) < 0 ? -1 : len;
}

ob_httpd_stream *ob_httpd_res_stream(ob_httpd_res *res, ob_httpd_gone gone, void *ud) {
  if (!res->stream) {
    res->stream = ob_xcalloc(1, sizeof *res->stream);
    ob_buf_init(&res->stream->out);
  }
  res->stream->gone = gone;
  res->stream->ud = ud;
  return res->stream;
}

int ob_httpd_stream_send(ob_httpd_stream *st, const char *data, size_t len) {
  if (st->cut || st->ended)
    return -1;
  if (st->sent && st->sent == st->out.len) { /* all written: start over */
    st->out.len = 0;
    st->sent = 0;
  } else if (st->sent > st->out.len / 2) { /* half written: keep the rest only */
    memmove(st->out.data, st->out.data + st->sent, st->out.len - st->sent);
    st->out.len -= st->sent;
    st->sent = 0;
  }
  if (st->out.len - st->sent + len > HTTPD_MAX_QUEUED) {
    st->cut = 1; /* closed at its next writable callback */
    if (st->wsi)
      lws_callback_on_writable(st->wsi);
    return -1;
  }
  ob_buf_add(&st->out, data, len);
  if (st->wsi)
    lws_callback_on_writable(st->wsi);
  return 0;
}

size_t ob_httpd_stream_queued(const ob_httpd_stream *st) { return st->out.len - st->sent; }

void ob_httpd_stream_end(ob_httpd_stream *st) {
  st->ended = 1;
  if (st->wsi)
    lws_callback_on_writable(st->wsi);
}

/* The request is whole: the handler answers it. */
static int dispatch(struct lws *wsi, session *s) {
  ob_httpd *h = lws_context_user(lws_get_context(wsi));
  ob_httpd_req req = {s->method, s->path ? s->path : "/", s->query ? s->query : "",
                      s->origin, s->auth, s->cookie, s->body.data ? s->body.data : "",
                      s->body.len, wsi};
  ob_httpd_res res = {0};
  ob_buf_init(&res.body);
  /* the handler may take a while (a journal of 100,000 calls read): no timeout of the
   * library's may close the connection meanwhile; the answer then has 2 minutes */
  lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
  h->cfg.handler(h->cfg.ud, &req, &res);
  s->status = res.status ? res.status : 200;
  s->ctype = ob_xstrdup(res.content_type ? res.content_type : "application/json");
  snprintf(s->extra, sizeof s->extra, "%s", res.extra);
  if (res.stream) { /* the body so far goes first, then what the host sends */
    ob_httpd_stream *st = res.stream;
    ob_buf_add(&res.body, st->out.data ? st->out.data : "", st->out.len);
    ob_buf_free(&st->out);
    st->out = res.body;
    st->wsi = wsi;
    s->stream = st;
    lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0); /* it may stay quiet a while */
  } else {
    s->out = res.body;
    lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, 120);
  }
  return respond(wsi, s);
}

static int add_extra(struct lws *wsi, const char *extra, unsigned char **p, unsigned char *end);

/* The response's headers written (len: the body's length, or LWS_ILLEGAL_HTTP_CONTENT_LEN
 * for a stream's, which has none), into buf's room after LWS_PRE: 0, or -1. */
static int write_headers(struct lws *wsi, session *s, lws_filepos_t len, unsigned char *start,
                         unsigned char *end) {
  unsigned char *p = start;
  if (lws_add_http_common_headers(wsi, (unsigned int)s->status, s->ctype, len, &p, end) ||
      add_extra(wsi, s->extra, &p, end) ||
      lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:",
                                  (const unsigned char *)"no-store", 8, &p, end) ||
      lws_finalize_write_http_header(wsi, start, &p, end))
    return -1;
  s->headers_done = 1;
  return 0;
}

/* One writable turn's headers, in a buffer as big as they may be (after the LWS_PRE
 * bytes the library may use): 0, or -1. */
static int write_turn_headers(struct lws *wsi, session *s, lws_filepos_t len) {
  unsigned char *buf = ob_xmalloc(LWS_PRE + HTTPD_HEADERS_ROOM);
  unsigned char *start = buf + LWS_PRE;
  int rc = write_headers(wsi, s, len, start, start + HTTPD_HEADERS_ROOM - 1);
  free(buf);
  return rc;
}

/* One writable turn's n bytes of body, copied into a buffer of their size (after
 * LWS_PRE): a small answer never costs a chunk's allocation. 0, or -1. */
static int write_turn_body(struct lws *wsi, const char *data, size_t n,
                           enum lws_write_protocol how) {
  unsigned char *buf = ob_xmalloc(LWS_PRE + n);
  memcpy(buf + LWS_PRE, data, n);
  int rc = lws_write(wsi, buf + LWS_PRE, n, how) == (int)n ? 0 : -1;
  free(buf);
  return rc;
}

/* A stream's turn to write: the headers, then what is queued, a chunk at a time. */
static int write_stream(struct lws *wsi, session *s) {
  ob_httpd_stream *st = s->stream;
  if (st->cut)
    return -1;
  int rc = 0;
  if (!s->headers_done) {
    rc = write_turn_headers(wsi, s, LWS_ILLEGAL_HTTP_CONTENT_LEN);
  } else if (st->sent < st->out.len) {
    size_t n = st->out.len - st->sent > HTTPD_STREAM_CHUNK ? HTTPD_STREAM_CHUNK
                                                           : st->out.len - st->sent;
    rc = write_turn_body(wsi, st->out.data + st->sent, n, LWS_WRITE_HTTP);
    st->sent += n;
  }
  if (rc)
    return rc;
  if (st->sent < st->out.len)
    lws_callback_on_writable(wsi);
  else if (st->ended)
    return -1; /* all written: the connection's end is the body's */
  return 0;
}

/* The extra header lines ("name: value\r\n") added to the response's headers. */
static int add_extra(struct lws *wsi, const char *extra, unsigned char **p, unsigned char *end) {
  while (*extra) {
    const char *colon = strchr(extra, ':'), *eol = strstr(extra, "\r\n");
    if (!colon || !eol || colon > eol)
      return 0;
    char name[64];
    size_t n = (size_t)(colon - extra) + 1;
    if (n >= sizeof name)
      return 1;
    for (size_t i = 0; i < n; i++) /* the library wants them lower case, with the colon */
      name[i] = (char)(extra[i] >= 'A' && extra[i] <= 'Z' ? extra[i] + 32 : extra[i]);
    name[n] = '\0';
    const char *v = colon + 1;
    while (*v == ' ')
      v++;
    if (lws_add_http_header_by_name(wsi, (const unsigned char *)name, (const unsigned char *)v,
                                    (int)(eol - v), p, end))
      return 1;
    extra = eol + 2;
  }
  return 0;
}

static int write_some(struct lws *wsi, session *s) {
  if (s->stream)
    return write_stream(wsi, s);
  int rc = 0, more = 0;
  if (!s->headers_done) {
    if (write_turn_headers(wsi, s, s->out.len))
      rc = 1;
    more = s->out.len > 0;
  } else {
    size_t n = s->out.len - s->sent > HTTPD_CHUNK ? HTTPD_CHUNK : s->out.len - s->sent;
    int final = s->sent + n == s->out.len;
    if (write_turn_body(wsi, s->out.data + s->sent, n,
                        final ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP))
      rc = 1;
    s->sent += n;
    more = !final;
  }
  if (rc)
    return rc;
  if (more) {
    lws_callback_on_writable(wsi);
    return 0;
  }
  int close = s->too_big, ended = s->body_ended; /* its body was not kept: the
                                                    connection cannot go on */
  session_clear(s);
  if (close && !ended) { /* the rest of the body first (HTTPD_DRAIN_MAX) */
    s->draining = 1;
    lws_set_timeout(wsi, PENDING_TIMEOUT_HTTP_CONTENT, HTTPD_DRAIN_S);
    return 0;
  }
  if (close || lws_http_transaction_completed(wsi))
    return -1;
  return 0;
}

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len) {
  session *s = user;
  ob_httpd *h = lws_context_user(lws_get_context(wsi));
  switch (reason) {
  case LWS_CALLBACK_HTTP: {
    session_clear(s);
    s->path = ob_xstrndup(in ? (const char *)in : "/", in ? strlen(in) : 1);
    static const struct { enum lws_token_indexes t; const char *name; int body; } methods[] = {
        {WSI_TOKEN_GET_URI, "GET", 0},        {WSI_TOKEN_POST_URI, "POST", 1},
        {WSI_TOKEN_DELETE_URI, "DELETE", 0},  {WSI_TOKEN_PUT_URI, "PUT", 1},
        {WSI_TOKEN_PATCH_URI, "PATCH", 1},    {WSI_TOKEN_OPTIONS_URI, "OPTIONS", 0},
    };
    const char *method = "OTHER";
    int post = 0;
    for (size_t i = 0; i < sizeof methods / sizeof *methods; i++)
      if (lws_hdr_total_length(wsi, methods[i].t) > 0) {
        method = methods[i].name;
        post = methods[i].body;
        break;
      }
    s->method = ob_xstrdup(method);
    s->query = query(wsi);
    s->origin = header(wsi, WSI_TOKEN_ORIGIN);
    s->auth = header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION);
    s->cookie = header(wsi, WSI_TOKEN_HTTP_COOKIE);
    ob_buf_init(&s->body);
    char te[16];
    int chunked = lws_hdr_copy(wsi, te, sizeof te, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0;
    if (post && (chunked || lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0))
      return 0; /* the body comes: LWS_CALLBACK_HTTP_BODY, then its completion */
    return dispatch(wsi, s);
  }
  case LWS_CALLBACK_HTTP_BODY: {
    size_t max = h->cfg.max_body ? h->cfg.max_body : HTTPD_MAX_BODY;
    if (s->draining) { /* dropped; closed past HTTPD_DRAIN_MAX */
      s->drained += len;
      return s->drained > HTTPD_DRAIN_MAX ? -1 : 0;
    }
    if (s->too_big || s->responding)
      return 0;
    if (s->body.len + len > max) { /* answered now; the rest is never read */
      s->too_big = 1;
      s->status = 413;
      s->ctype = ob_xstrdup("application/json");
      ob_buf_init(&s->out);
      ob_buf_addf(&s->out, "{\"error\":\"the request's body is larger than %zu bytes\"}", max);
      return respond(wsi, s);
    }
    ob_buf_add(&s->body, in, len);
    return 0;
  }
  case LWS_CALLBACK_HTTP_BODY_COMPLETION:
    if (s->draining) /* all of it read: the connection closes */
      return -1;
    if (s->too_big)
      s->body_ended = 1;
    if (s->too_big || s->responding)
      return 0;
    ob_buf_addc(&s->body, '\0');
    s->body.len--;
    return dispatch(wsi, s);
  case LWS_CALLBACK_HTTP_WRITEABLE:
    if (!s || !s->responding)
      return 0;
    return write_some(wsi, s);
  case LWS_CALLBACK_CLOSED_HTTP:
  case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
    if (s)
      session_clear(s);
    return 0;
  default:
    return lws_callback_http_dummy(wsi, reason, user, in, len);
  }
}

static const struct lws_protocols protocols[] = {
    {"http", callback, sizeof(session), 0, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* A connection is waiting: accepted here, then the library's (it owns the socket). */
static void on_listen(uv_poll_t *p, int status, int events) {
  ob_httpd *h = p->data;
  (void)events;
  if (status < 0 || h->closing)
    return;
  for (int k = 0; k < 64; k++) { /* a few at a turn: the loop goes on meanwhile */
    int fd = accept4(h->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0)
      return; /* EAGAIN: no more now; EMFILE and the like: the next turn tries again */
    if (!lws_adopt_socket_vhost(h->vh, fd))
      close(fd);
  }
}

/* The listening socket on bind:port: ours, so that an address that is not this
 * machine's, or a port taken, is an error here (the library would bind what it could). */
static int listen_on(ob_httpd *h, const char *addr, int port, ob_error *err) {
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t len;
  struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
  struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
  if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons((uint16_t)port);
    len = sizeof *a4;
  } else if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons((uint16_t)port);
    len = sizeof *a6;
  } else {
    return ob_error_set(err, OB_EINVAL, 0, "--bind %s is not an IP address (127.0.0.1, ::1, "
                        "0.0.0.0, ...)", addr);
  }
  int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0), one = 1;
  if (fd < 0)
    return ob_error_set(err, OB_EIO, 0, "cannot make a socket: %s", strerror(errno));
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 128) != 0) {
    int e = errno;
    close(fd);
    return ob_error_set(err, OB_EIO, 0, "cannot listen on %s port %d: %s", addr, port,
                        e == EADDRINUSE      ? "the port is taken"
                        : e == EADDRNOTAVAIL ? "not an address of this machine"
                                             : strerror(e));
  }
  getsockname(fd, (struct sockaddr *)&ss, &len);
  h->port = ss.ss_family == AF_INET ? ntohs(a4->sin_port) : ntohs(a6->sin6_port);
  h->fd = fd;
  return OB_OK;
}

ob_httpd *ob_httpd_new(uv_loop_t *loop, const ob_httpd_config *cfg, ob_error *err) {
  if (ob_lws_load(err) != OB_OK) /* the library, at the first server (ob_lws.c says why) */
    return NULL;
  lws_set_log_level(0, NULL); /* nothing printed: only the CLI prints */
  ob_httpd *h = ob_xcalloc(1, sizeof *h);
  h->cfg = *cfg;
  h->fd = -1;
  if (listen_on(h, cfg->bind ? cfg->bind : "127.0.0.1", cfg->port, err) != OB_OK) {
    free(h);
    return NULL;
  }
  struct lws_context_creation_info info;
  memset(&info, 0, sizeof info);
  void *loops[1] = {loop};
  info.options = LWS_SERVER_OPTION_LIBUV;
  info.foreign_loops = loops;
  info.port = CONTEXT_PORT_NO_LISTEN_SERVER; /* a server whose sockets we hand it */
  info.protocols = protocols;
  info.user = h;
  info.pcontext = &h->ctx; /* set to NULL when the library has let go of it all */
  h->ctx = lws_create_context(&info);
  h->vh = h->ctx ? lws_get_vhost_by_name(h->ctx, "default") : NULL;
  if (!h->vh || uv_poll_init(loop, &h->poll, h->fd) != 0) {
    ob_error_set(err, OB_EIO, 0, "cannot start the HTTP server (libwebsockets with its libuv "
                 "event library: is libwebsockets-evlib-uv installed?)");
    close(h->fd);
    h->fd = -1;
    if (h->ctx) /* it keeps h until the loop has closed its handles: let it */
      ob_httpd_close(h);
    else
      free(h);
    return NULL;
  }
  h->poll.data = h;
  h->polling = 1;
  uv_poll_start(&h->poll, UV_READABLE, on_listen);
  return h;
}

int ob_httpd_port(const ob_httpd *h) { return h->port; }

static void poll_closed(uv_handle_t *p) {
  ob_httpd *h = p->data;
  close(h->fd);
  h->fd = -1;
}

void ob_httpd_close(ob_httpd *h) {
  if (!h || h->closing)
    return;
  h->closing = 1;
  if (h->polling) {
    h->polling = 0;
    uv_close((uv_handle_t *)&h->poll, poll_closed);
  }
  if (h->ctx)
    lws_context_destroy(h->ctx); /* its handles close as the loop runs */
}

void ob_httpd_free(ob_httpd *h) {
  if (!h)
    return;
  ob_httpd_close(h);
  if (h->ctx) /* the loop ran and closed its handles: the rest goes now */
    lws_context_destroy(h->ctx);
  if (h->fd >= 0)
    close(h->fd);
  free(h);
}
