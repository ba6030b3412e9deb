/* ob_httpd.h -- an HTTP server on a libuv loop the host owns (ob_httpd.c), for what the
 * engine serves: the UI's API and pages (`obelus ui`), later MCP over HTTP. */
#ifndef OB_HTTPD_H
#define OB_HTTPD_H

#include <stddef.h>
#include <uv.h>

#include "base/ob_buf.h"
#include "base/ob_error.h"

typedef struct ob_httpd ob_httpd;

/* A request, whole (its body read), as the handler sees it: valid during the call. */
typedef struct ob_httpd_req {
  const char *method;  /* "GET", "POST", ... */
  const char *path;    /* the URL's path, percent-decoded by the server library */
  const char *query;   /* the URL's arguments as sent ("a=1&b=2"), or "" */
  const char *origin;  /* the Origin header, or NULL */
  const char *auth;    /* the Authorization header, or NULL */
  const char *cookie;  /* the Cookie header, or NULL */
  const char *body;    /* the body (NUL-terminated; may hold NUL bytes), or "" */
  size_t body_len;
} ob_httpd_req;

/* What the handler answers: status, type and body; a header line or two more. */
typedef struct ob_httpd_res {
  int status;                /* 200 when left 0 */
  const char *content_type;  /* "application/json" when left NULL */
  ob_buf body;               /* initialised empty; the handler appends */
  char extra[512];           /* more header lines ("Name: value\r\n" each), or "" */
} ob_httpd_res;

typedef void (*ob_httpd_handler)(void *ud, const ob_httpd_req *req, ob_httpd_res *res);

typedef struct ob_httpd_config {
  const char *bind;    /* an address to listen on ("127.0.0.1", "0.0.0.0", "::1") */
  int port;            /* 0: one the kernel picks (ob_httpd_port says which) */
  size_t max_body;     /* the largest request body taken (larger: 413); 0: 1 MB */
  ob_httpd_handler handler;
  void *ud;
} ob_httpd_config;

/* Starts listening on loop. NULL with err (the address taken, a bind refused). */
ob_httpd *ob_httpd_new(uv_loop_t *loop, const ob_httpd_config *cfg, ob_error *err);
/* The port it listens on. */
int ob_httpd_port(const ob_httpd *h);
/* Stops listening and closes its connections: the library's handles close as the loop
 * runs. Then, once the caller has run the loop (uv_run until nothing is left),
 * ob_httpd_free lets go of the rest (it closes first when that was not done). */
void ob_httpd_close(ob_httpd *h);
void ob_httpd_free(ob_httpd *h);

#endif
