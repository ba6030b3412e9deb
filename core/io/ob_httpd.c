/* ob_httpd.c -- an HTTP server on a libuv loop the host owns.
 *
 * libwebsockets (its libuv event library, joining a foreign loop) parses HTTP and
 * writes it; this file turns its callbacks into one call of the host's handler per
 * request, with the request whole: method, path, arguments, the three headers the
 * UI's security needs (Origin, Authorization, Cookie) and the body, read up to a bound
 * (a larger one is answered 413 and its connection closed, never buffered). The
 * handler answers at once: a status, a type, a body and a header line or two, which
 * are written as the connection takes them (a chunk of 4 KB a writable callback), so a
 * slow reader holds its own response only.
 *
 * Nothing here prints: the library's own log is off (its errors come back as ours).
 * The library is loaded when the first server starts (ob_lws.c), not linked.
 *
 * Costs: per connection, the library's struct and this file's session (the request's
 * strings, its body, the response until written); no thread. */
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

#define HTTPD_CHUNK 4096
#define HTTPD_MAX_BODY ((size_t)1 << 20)

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
} session;

static void session_clear(session *s) {
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

/* The request is whole: the handler answers it. */
static int dispatch(struct lws *wsi, session *s) {
  ob_httpd *h = lws_context_user(lws_get_context(wsi));
  ob_httpd_req req = {s->method, s->path ? s->path : "/", s->query ? s->query : "",
                      s->origin, s->auth, s->cookie, s->body.data ? s->body.data : "",
                      s->body.len};
  ob_httpd_res res = {0};
  ob_buf_init(&res.body);
  h->cfg.handler(h->cfg.ud, &req, &res);
  s->status = res.status ? res.status : 200;
  s->ctype = ob_xstrdup(res.content_type ? res.content_type : "application/json");
  snprintf(s->extra, sizeof s->extra, "%s", res.extra);
  s->out = res.body;
  return respond(wsi, s);
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
  unsigned char buf[LWS_PRE + HTTPD_CHUNK + 1024];
  unsigned char *start = buf + LWS_PRE, *p = start, *end = buf + sizeof buf - 1;
  if (!s->headers_done) {
    if (lws_add_http_common_headers(wsi, (unsigned int)s->status, s->ctype, s->out.len, &p, end) ||
        add_extra(wsi, s->extra, &p, end) ||
        lws_add_http_header_by_name(wsi, (const unsigned char *)"cache-control:",
                                    (const unsigned char *)"no-store", 8, &p, end) ||
        lws_finalize_write_http_header(wsi, start, &p, end))
      return 1;
    s->headers_done = 1;
    if (s->out.len) {
      lws_callback_on_writable(wsi);
      return 0;
    }
  } else {
    size_t n = s->out.len - s->sent > HTTPD_CHUNK ? HTTPD_CHUNK : s->out.len - s->sent;
    memcpy(start, s->out.data + s->sent, n);
    int final = s->sent + n == s->out.len;
    if (lws_write(wsi, start, n, final ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) != (int)n)
      return 1;
    s->sent += n;
    if (!final) {
      lws_callback_on_writable(wsi);
      return 0;
    }
  }
  int close = s->too_big; /* its body was not read: the connection cannot go on */
  session_clear(s);
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
    int get = lws_hdr_total_length(wsi, WSI_TOKEN_GET_URI) > 0;
    int post = lws_hdr_total_length(wsi, WSI_TOKEN_POST_URI) > 0;
    s->method = ob_xstrdup(get ? "GET" : post ? "POST" : "OTHER");
    s->query = query(wsi);
    s->origin = header(wsi, WSI_TOKEN_ORIGIN);
    s->auth = header(wsi, WSI_TOKEN_HTTP_AUTHORIZATION);
    s->cookie = header(wsi, WSI_TOKEN_HTTP_COOKIE);
    ob_buf_init(&s->body);
    if (post)
      return 0; /* the body comes: LWS_CALLBACK_HTTP_BODY, then its completion */
    return dispatch(wsi, s);
  }
  case LWS_CALLBACK_HTTP_BODY: {
    size_t max = h->cfg.max_body ? h->cfg.max_body : HTTPD_MAX_BODY;
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
