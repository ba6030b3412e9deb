/* ob_httpd.h -- an HTTP server on a libuv loop the host owns (ob_httpd.c), for what the
 * engine serves: the UI's API and pages (`obelus ui`), and MCP over HTTP. */
#ifndef OB_HTTPD_H
#define OB_HTTPD_H

#include <stddef.h>
#include <uv.h>

#include "base/ob_buf.h"
#include "base/ob_error.h"

typedef struct ob_httpd ob_httpd;

/* A request, whole (its body read), as the handler sees it: valid during the call. */
typedef struct ob_httpd_req {
  const char *method;  /* "GET", "POST", "DELETE", "PUT", "PATCH", "OPTIONS", or "OTHER" */
  const char *path;    /* the URL's path, percent-decoded by the server library */
  const char *query;   /* the URL's arguments as sent ("a=1&b=2"), or "" */
  const char *origin;  /* the Origin header, or NULL */
  const char *auth;    /* the Authorization header, or NULL */
  const char *cookie;  /* the Cookie header, or NULL */
  const char *body;    /* the body (NUL-terminated; may hold NUL bytes), or "" */
  size_t body_len;
  void *conn;          /* the server's: for ob_httpd_header */
} ob_httpd_req;

/* Any other header of req ("accept", "content-type", "mcp-session-id", ...: the name in
 * any case, without its colon), copied into buf with a NUL: its length, or -1 when the
 * request has none or it does not fit (headers are bounded: 4 KB in all). */
int ob_httpd_header(const ob_httpd_req *req, const char *name, char *buf, size_t size);

/* What the handler answers: status, type and body; a header line or two more. */
typedef struct ob_httpd_res {
  int status;                /* 200 when left 0 */
  const char *content_type;  /* "application/json" when left NULL */
  ob_buf body;               /* initialised empty; the handler appends */
  char extra[512];           /* more header lines ("Name: value\r\n" each), or "" */
  struct ob_httpd_stream *stream; /* set by ob_httpd_res_stream */
} ob_httpd_res;

typedef void (*ob_httpd_handler)(void *ud, const ob_httpd_req *req, ob_httpd_res *res);

/* A response that stays open (Server-Sent Events, a long answer): the handler calls
 * ob_httpd_res_stream, and the headers go at once, without a length (the body ends when
 * the connection does); res->body, if any, is its first bytes, and the rest is sent with
 * ob_httpd_stream_send as the host has it. gone(ud) is called once, when the stream is
 * over for any reason: the client left, ob_httpd_stream_end's bytes were all written, a
 * client that read too slowly was cut off, or the server closed. The handle is invalid
 * from then on (gone may free what ud is). */
typedef struct ob_httpd_stream ob_httpd_stream;
typedef void (*ob_httpd_gone)(void *ud);
ob_httpd_stream *ob_httpd_res_stream(ob_httpd_res *res, ob_httpd_gone gone, void *ud);
/* Queues len bytes for the client. A client more than 16 MB behind is cut off (its
 * connection closed, gone called after this returns): -1 then, else 0. */
int ob_httpd_stream_send(ob_httpd_stream *st, const char *data, size_t len);
/* The bytes queued and not yet taken by the connection. */
size_t ob_httpd_stream_queued(const ob_httpd_stream *st);
/* Ends the stream once what is queued has been written. */
void ob_httpd_stream_end(ob_httpd_stream *st);
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
