/* ob_mcp_http.c -- the MCP server over Streamable HTTP (ob_mcp_http.h): sessions, each
 * with its own ob_mcp, and the routing of what each sends to the HTTP responses open.
 *
 * A POST is an exchange: its body is parsed here first (not JSON: 400 with a -32700
 * error, id null; its session checked; its requests' ids and progress tokens noted),
 * then handed whole to the session's ob_mcp. What the ob_mcp sends is routed by what it
 * is: an answer (an object with an id, or a batch's array) to the open exchange that
 * awaits one of its ids (the exchange being handled first: a client may reuse an id
 * once answered), a progress notification to the exchange whose request carries its
 * token, anything else answered at once (an error of id null) to the exchange being
 * handled. An exchange gets one answer: a message's, or a batch's one array.
 *
 * The form of a response, decided once its POST has been handled:
 *   - an answer ready at once (initialize, tools/list, ping, errors, a call refused
 *     before it ran): application/json, unless a request asked for progress and the
 *     client takes event streams, or it takes event streams only: then the stream's
 *     events (progress first, then the answer) in one response with its length;
 *   - an answer to come (a call running): an event stream left open when the client
 *     takes them (Accept: text/event-stream, text/ *, or * / *): each notification an
 *     event ("event: message", "data: JSON"), the answer last, then the end; for a
 *     client that takes JSON only, application/json left open until the answer is
 *     its body (progress is not sent: JSON holds one message);
 *   - no answer (notifications, responses): 202, no body.
 * An answer that is not a request's (id null: the body was not a valid message, a
 * batch was refused) is sent with 400. A request cancelled (notifications/cancelled)
 * gets no answer (ob_mcp drops it): its exchange, once it awaits nothing more, is
 * ended without one. A client that leaves before its answer does not cancel the call
 * (the MCP revisions say so: it must cancel): the answer, when it comes, finds no
 * response and is dropped. No standalone stream is offered (GET: 405): nothing is
 * sent that belongs to no request.
 *
 * Sessions: made by a POST of one initialize request without Mcp-Session-Id, kept when
 * initialize agreed on a version (the id, 32 hex digits of getrandom, goes back in the
 * header); a request naming the session with MCP-Protocol-Version other than the agreed
 * one is 400. DELETE ends a session: its ob_mcp freed (its calls cancelled, their
 * processes killed), its open responses ended without their answers. At most
 * max_sessions: a new one ends the one unused longest with nothing running or open,
 * or is refused with 503.
 *
 * Costs: per session, an ob_mcp (its running calls: ob_mcp.h); per open exchange, its
 * ids and tokens and the queue of its stream (bounded by ob_httpd: a client 16 MB
 * behind is cut off); each message sent is parsed once more to be routed (linear in its
 * length), and found among the session's open exchanges (a scan). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "host/ob_http_auth.h"
#include "host/ob_mcp.h"
#include "host/ob_mcp_http.h"
#include "io/ob_httpd.h"

typedef struct session session;
typedef struct exchange exchange;

struct exchange {
  exchange *next, *prev; /* in the server's list of those left open (streams) */
  exchange *snext;       /* in its session's list of those awaiting an answer */
  session *s;            /* NULL once answered or ended, or once its session ended */
  ob_mcp_http *h;
  ob_value *ids;         /* the ids of its requests (an array), until it is answered */
  ob_value *tokens;      /* their progress tokens (an array) */
  int sse;               /* the client takes event streams */
  int answered;
  int refused;           /* its answer is not a request's (id null: the input refused) */
  ob_buf events;         /* while its POST is handled: its notifications, as events */
  ob_buf answer;         /* ... and its answer, as JSON */
  ob_httpd_stream *st;   /* its response, once left open */
};

struct session {
  session *next;
  ob_mcp_http *h;
  char id[33];
  ob_mcp *m;
  exchange *open;       /* the exchanges awaiting an answer */
  exchange *cur;        /* the one whose POST is being handled, or NULL */
  unsigned long long used;
};

struct ob_mcp_http {
  ob_engine *e;
  ob_httpd *http;
  char *bind;
  char *token;
  int token_made;
  size_t max_sessions, nsessions;
  unsigned max_slice_ms;
  session *sessions;
  exchange *streams;    /* the exchanges whose response is open */
  unsigned long long tick;
  int closed;
};

/* --- exchanges ------------------------------------------------------------------------ */

static void exchange_free(exchange *x) {
  ob_unref(x->ids);
  ob_unref(x->tokens);
  ob_buf_free(&x->events);
  ob_buf_free(&x->answer);
  free(x);
}

/* x out of its session's list of those awaiting an answer. */
static void exchange_detach(exchange *x) {
  session *s = x->s;
  if (!s)
    return;
  for (exchange **pp = &s->open; *pp; pp = &(*pp)->snext)
    if (*pp == x) {
      *pp = x->snext;
      break;
    }
  x->snext = NULL;
  x->s = NULL;
}

/* The response is over (the client left, its end written, the server closed). */
static void exchange_gone(void *ud) {
  exchange *x = ud;
  exchange_detach(x);
  if (x->prev)
    x->prev->next = x->next;
  else
    x->h->streams = x->next;
  if (x->next)
    x->next->prev = x->prev;
  exchange_free(x);
}

/* x awaits nothing more: its response, if left open, ends once written. */
static void exchange_end(exchange *x) {
  exchange_detach(x);
  if (x->st)
    ob_httpd_stream_end(x->st);
}

static void add_event(ob_buf *b, const char *json, size_t len) {
  ob_buf_add(b, "event: message\ndata: ", 21);
  ob_buf_add(b, json, len);
  ob_buf_add(b, "\n\n", 2);
}

/* A message for x: held while its POST is handled, else sent on its stream. */
static void exchange_deliver(exchange *x, const char *json, size_t len, int is_answer) {
  if (!x->st) {
    if (is_answer)
      ob_buf_add(&x->answer, json, len);
    else
      add_event(&x->events, json, len);
  } else if (x->sse) {
    ob_buf ev;
    ob_buf_init(&ev);
    add_event(&ev, json, len);
    ob_httpd_stream_send(x->st, ev.data, ev.len); /* a client too far behind: gone comes */
    ob_buf_free(&ev);
  } else if (is_answer) {
    ob_httpd_stream_send(x->st, json, len);
  }
  if (is_answer) {
    x->answered = 1;
    exchange_end(x);
  }
}

/* 1 when x awaits an answer to id. */
static int awaits(const exchange *x, const ob_value *id) {
  for (size_t i = 0; id && x->ids && i < ob_array_len(x->ids); i++)
    if (ob_equal(ob_array_get(x->ids, i), id))
      return 1;
  return 0;
}

static int carries(const exchange *x, const ob_value *token) {
  for (size_t i = 0; token && i < ob_array_len(x->tokens); i++)
    if (ob_equal(ob_array_get(x->tokens, i), token))
      return 1;
  return 0;
}

/* The exchange of s awaiting an answer to id (the one being handled first), or NULL. */
static exchange *owner_of(session *s, const ob_value *id, int token) {
  if (s->cur && s->cur->s && (token ? carries(s->cur, id) : awaits(s->cur, id)))
    return s->cur;
  for (exchange *x = s->open; x; x = x->snext)
    if (token ? carries(x, id) : awaits(x, id))
      return x;
  return NULL;
}

/* What the session's ob_mcp sends, routed (see the top of this file). */
static void on_send(void *ud, const char *json, size_t len) {
  session *s = ud;
  ob_error err;
  ob_value *v = ob_json_parse(json, len, &err);
  if (!v)
    return; /* never: ob_mcp prints JSON */
  exchange *x = NULL;
  int is_answer = 0, null_id = 0;
  if (ob_typeof(v) == OB_ARRAY) { /* a batch's answers */
    is_answer = 1;
    for (size_t i = 0; !x && i < ob_array_len(v); i++) {
      const ob_value *m = ob_array_get(v, i);
      x = ob_typeof(m) == OB_OBJECT ? owner_of(s, ob_object_get(m, "id", 2), 0) : NULL;
    }
  } else if (ob_typeof(v) == OB_OBJECT && !ob_object_get(v, "method", 6)) {
    is_answer = 1;
    const ob_value *id = ob_object_get(v, "id", 2);
    null_id = !id || ob_typeof(id) == OB_NULL;
    x = owner_of(s, id, 0);
  } else if (ob_typeof(v) == OB_OBJECT) { /* a notification: progress, of a request */
    const ob_value *p = ob_object_get(v, "params", 6);
    const ob_value *t = p && ob_typeof(p) == OB_OBJECT ? ob_object_get(p, "progressToken", 13) : NULL;
    x = owner_of(s, t, 1);
  }
  if (!x && is_answer && s->cur && s->cur->s) {
    x = s->cur; /* an answer to no request (id null): the body being handled's */
    x->refused = null_id;
  }
  if (x)
    exchange_deliver(x, json, len, is_answer);
  ob_unref(v);
}

/* --- sessions ------------------------------------------------------------------------- */

/* Ends s: its calls cancelled (nothing more sent), its open responses ended. */
static void session_end(ob_mcp_http *h, session *s) {
  for (session **pp = &h->sessions; *pp; pp = &(*pp)->next)
    if (*pp == s) {
      *pp = s->next;
      h->nsessions--;
      break;
    }
  ob_mcp_free(s->m);
  while (s->open)
    exchange_end(s->open);
  free(s);
}

static session *session_find(ob_mcp_http *h, const char *id, size_t len) {
  for (session *s = h->sessions; s; s = s->next)
    if (ob_http_auth_same(s->id, id, len))
      return s;
  return NULL;
}

/* A new session, or NULL (with why) when there is no room or no id to be had. */
static session *session_new(ob_mcp_http *h, const char **why) {
  if (h->nsessions >= h->max_sessions) { /* the one unused longest with nothing going on */
    session *old = NULL;
    for (session *s = h->sessions; s; s = s->next)
      if (!s->open && !ob_mcp_pending(s->m) && (!old || s->used < old->used))
        old = s;
    if (!old) {
      *why = "too many sessions, all busy: try again later";
      return NULL;
    }
    session_end(h, old);
  }
  session *s = ob_xcalloc(1, sizeof *s);
  if (ob_http_auth_make_token(s->id) < 0) {
    free(s);
    *why = "no session id could be made (getrandom)";
    return NULL;
  }
  s->h = h;
  s->m = ob_mcp_new(h->e, on_send, s);
  ob_mcp_set_max_slice(s->m, h->max_slice_ms);
  s->next = h->sessions;
  h->sessions = s;
  h->nsessions++;
  return s;
}

/* --- requests ------------------------------------------------------------------------- */

/* An error the transport answers itself: a JSON-RPC error of id null. */
static void http_error(ob_httpd_res *res, int status, int code, const char *msg) {
  res->status = status;
  ob_value *e = ob_object_set(ob_object(), "code", 4, ob_int(code));
  e = ob_object_set(e, "message", 7, ob_cstring(msg));
  ob_value *o = ob_object_set(ob_object(), "jsonrpc", 7, ob_cstring("2.0"));
  o = ob_object_set(o, "id", 2, ob_null());
  o = ob_object_set(o, "error", 5, e);
  ob_json_write(&res->body, o, OB_JSON_COMPACT);
  ob_unref(o);
}

/* The requests of a body (an object, or a batch's members): their ids and tokens. */
static void requests_of(const ob_value *msg, ob_value **ids, ob_value **tokens) {
  size_t n = ob_typeof(msg) == OB_ARRAY ? ob_array_len(msg) : 1;
  *ids = ob_array();
  *tokens = ob_array();
  for (size_t i = 0; i < n; i++) {
    const ob_value *m = ob_typeof(msg) == OB_ARRAY ? ob_array_get(msg, i) : msg;
    if (ob_typeof(m) != OB_OBJECT || !ob_object_get(m, "method", 6))
      continue;
    const ob_value *id = ob_object_get(m, "id", 2);
    if (!id)
      continue; /* a notification */
    *ids = ob_array_push(*ids, ob_ref((ob_value *)id));
    const ob_value *p = ob_object_get(m, "params", 6);
    const ob_value *meta = p && ob_typeof(p) == OB_OBJECT ? ob_object_get(p, "_meta", 5) : NULL;
    const ob_value *t = meta && ob_typeof(meta) == OB_OBJECT ? ob_object_get(meta, "progressToken", 13) : NULL;
    if (t)
      *tokens = ob_array_push(*tokens, ob_ref((ob_value *)t));
  }
}

/* The requests a body's notifications/cancelled name: the exchanges of s other than
 * x await no answer to them (ob_mcp sends none); one that awaits nothing more ends. */
static void forget_cancelled(session *s, exchange *x, const ob_value *msg) {
  size_t n = ob_typeof(msg) == OB_ARRAY ? ob_array_len(msg) : 1;
  for (size_t i = 0; i < n; i++) {
    const ob_value *m = ob_typeof(msg) == OB_ARRAY ? ob_array_get(msg, i) : msg;
    const ob_value *mt = ob_typeof(m) == OB_OBJECT ? ob_object_get(m, "method", 6) : NULL;
    if (!mt || ob_typeof(mt) != OB_STRING || strcmp(ob_string_ptr(mt), "notifications/cancelled") ||
        ob_object_get(m, "id", 2))
      continue;
    const ob_value *p = ob_object_get(m, "params", 6);
    const ob_value *rid = p && ob_typeof(p) == OB_OBJECT ? ob_object_get(p, "requestId", 9) : NULL;
    for (exchange *y = s->open, *next; rid && y; y = next) {
      next = y->snext;
      if (y == x || !awaits(y, rid))
        continue;
      ob_value *kept = ob_array();
      for (size_t k = 0; k < ob_array_len(y->ids); k++)
        if (!ob_equal(ob_array_get(y->ids, k), rid))
          kept = ob_array_push(kept, ob_ref(ob_array_get(y->ids, k)));
      ob_unref(y->ids);
      y->ids = kept;
      if (!ob_array_len(kept))
        exchange_end(y);
    }
  }
}

/* 1 when the Accept list names type (or a wildcard covering it: "text/ *", "* / *"). */
static int accepts(const char *accept, const char *type) {
  char wild[64];
  const char *slash = strchr(type, '/');
  snprintf(wild, sizeof wild, "%.*s/*", (int)(slash - type), type);
  return strstr(accept, type) || strstr(accept, wild) || strstr(accept, "*/*");
}

/* The session a request names: its Mcp-Session-Id known (else 400 or 404 answered), its
 * MCP-Protocol-Version, when it has one, the one agreed (else 400). */
static session *named_session(ob_mcp_http *h, const ob_httpd_req *req, ob_httpd_res *res) {
  char sid[128], pv[64];
  int n = ob_httpd_header(req, "mcp-session-id", sid, sizeof sid);
  if (n < 0) {
    http_error(res, 400, -32000, "Bad Request: no Mcp-Session-Id header (POST initialize first)");
    return NULL;
  }
  session *s = session_find(h, sid, (size_t)n);
  if (!s) {
    http_error(res, 404, -32001, "Session not found (ended, or never made): initialize again");
    return NULL;
  }
  const char *v = ob_mcp_version(s->m);
  if (ob_httpd_header(req, "mcp-protocol-version", pv, sizeof pv) >= 0 && v && strcmp(pv, v)) {
    char why[200];
    snprintf(why, sizeof why, "Bad Request: MCP-Protocol-Version %.64s is not this session's (%s)", pv, v);
    http_error(res, 400, -32000, why);
    return NULL;
  }
  s->used = ++h->tick;
  return s;
}

static int is_initialize(const ob_value *msg) {
  const ob_value *mt = ob_typeof(msg) == OB_OBJECT ? ob_object_get(msg, "method", 6) : NULL;
  return mt && ob_typeof(mt) == OB_STRING && !strcmp(ob_string_ptr(mt), "initialize") &&
         ob_object_get(msg, "id", 2);
}

static void post(ob_mcp_http *h, const ob_httpd_req *req, ob_httpd_res *res) {
  char accept[512];
  int an = ob_httpd_header(req, "accept", accept, sizeof accept);
  int json_ok = an < 0 || accepts(accept, "application/json");
  int sse_ok = an >= 0 && accepts(accept, "text/event-stream");
  if (!json_ok && !sse_ok) {
    http_error(res, 406, -32000, "Not Acceptable: the answers are application/json or text/event-stream");
    return;
  }
  size_t k = 0;
  while (k < req->body_len && req->body[k] && strchr(" \t\r\n", req->body[k]))
    k++;
  ob_error err;
  ob_value *msg = ob_json_parse(req->body + k, req->body_len - k, &err);
  if (!msg) {
    char why[600];
    snprintf(why, sizeof why, "Parse error: %s", err.msg);
    http_error(res, 400, -32700, why);
    return;
  }
  session *s;
  int fresh = 0;
  char sid[128];
  if (ob_httpd_header(req, "mcp-session-id", sid, sizeof sid) < 0 && is_initialize(msg)) {
    const char *why = NULL;
    if (!(s = session_new(h, &why))) {
      http_error(res, 503, -32000, why);
      ob_unref(msg);
      return;
    }
    fresh = 1;
    s->used = ++h->tick;
  } else if (!(s = named_session(h, req, res))) {
    ob_unref(msg);
    return;
  }
  exchange *x = ob_xcalloc(1, sizeof *x);
  x->h = h;
  x->s = s;
  x->sse = sse_ok;
  ob_buf_init(&x->events);
  ob_buf_init(&x->answer);
  requests_of(msg, &x->ids, &x->tokens);
  x->snext = s->open;
  s->open = x;
  s->cur = x;
  size_t before = ob_mcp_pending(s->m);
  ob_mcp_handle(s->m, req->body + k, req->body_len - k);
  s->cur = NULL;
  int waiting = !x->answered && ob_mcp_pending(s->m) > before;
  forget_cancelled(s, x, msg);
  if (fresh && ob_mcp_version(s->m)) /* initialize agreed: the session is the client's */
    snprintf(res->extra + strlen(res->extra), sizeof res->extra - strlen(res->extra),
             "Mcp-Session-Id: %s\r\n", s->id);
  if (waiting) { /* left open for the answer, and progress if it can be sent */
    x->st = ob_httpd_res_stream(res, exchange_gone, x);
    res->content_type = x->sse ? "text/event-stream" : "application/json";
    if (x->sse)
      ob_buf_add(&res->body, x->events.data ? x->events.data : "", x->events.len);
    ob_buf_free(&x->events);
    x->next = h->streams;
    if (h->streams)
      h->streams->prev = x;
    h->streams = x;
  } else {
    exchange_detach(x);
    if (!x->answered) {
      res->status = 202; /* notifications and responses: nothing to answer */
    } else {
      int events = sse_ok && (!json_ok || ob_array_len(x->tokens));
      if (x->refused)
        res->status = 400; /* not a request's answer: the input was refused */
      res->content_type = events ? "text/event-stream" : "application/json";
      if (events) {
        ob_buf_add(&res->body, x->events.data ? x->events.data : "", x->events.len);
        add_event(&res->body, x->answer.data, x->answer.len);
      } else {
        ob_buf_add(&res->body, x->answer.data, x->answer.len);
      }
    }
    exchange_free(x);
  }
  if (fresh && !ob_mcp_version(s->m))
    session_end(h, s); /* initialize was refused: no session */
  ob_unref(msg);
}

static void del(ob_mcp_http *h, const ob_httpd_req *req, ob_httpd_res *res) {
  session *s = named_session(h, req, res);
  if (s)
    session_end(h, s);
}

static void handle(void *ud, const ob_httpd_req *req, ob_httpd_res *res) {
  ob_mcp_http *h = ud;
  if (h->closed) {
    http_error(res, 503, -32000, "Service Unavailable: the server is stopping");
  } else if (strcmp(req->path, "/mcp")) {
    http_error(res, 404, -32000, "Not Found: the MCP endpoint is /mcp");
  } else if (!ob_http_auth_origin(req, h->bind)) {
    http_error(res, 403, -32000, "Forbidden: a request from a web page of another origin");
  } else if (!ob_http_auth_token(h->token, req, res)) {
    snprintf(res->extra, sizeof res->extra, "WWW-Authenticate: Bearer realm=\"obelus\"\r\n");
    http_error(res, 401, -32000, "Unauthorized: this server needs its token (Authorization: Bearer TOKEN)");
  } else if (!strcmp(req->method, "POST")) {
    post(h, req, res);
  } else if (!strcmp(req->method, "DELETE")) {
    del(h, req, res);
  } else {
    snprintf(res->extra + strlen(res->extra), sizeof res->extra - strlen(res->extra),
             "Allow: POST, DELETE\r\n");
    http_error(res, 405, -32000, "Method Not Allowed: POST a message; DELETE ends a session "
               "(no stream is offered at GET)");
  }
}

/* --- the server ----------------------------------------------------------------------- */

ob_mcp_http *ob_mcp_http_new(ob_engine *e, const ob_mcp_http_config *cfg, ob_error *err) {
  const char *bind = cfg->bind ? cfg->bind : "127.0.0.1";
  ob_mcp_http *h = ob_xcalloc(1, sizeof *h);
  h->e = e;
  h->bind = ob_xstrdup(bind);
  h->max_sessions = cfg->max_sessions ? cfg->max_sessions : OB_MCP_HTTP_MAX_SESSIONS;
  h->max_slice_ms = cfg->max_slice_ms;
  if (cfg->token && *cfg->token) {
    h->token = ob_xstrdup(cfg->token);
  } else if (!ob_http_auth_loopback(bind)) { /* anyone on the network could ask: one made */
    h->token = ob_xmalloc(33);
    if (ob_http_auth_make_token(h->token) < 0) {
      ob_error_set(err, OB_EIO, 0, "--bind %s needs a token, and none could be made: give --token", bind);
      ob_mcp_http_free(h);
      return NULL;
    }
    h->token_made = 1;
  }
  ob_httpd_config hc = {.bind = bind, .port = cfg->port, .handler = handle, .ud = h,
                        .max_body = cfg->max_body ? cfg->max_body : OB_MCP_MAX_LINE};
  if (!(h->http = ob_httpd_new(e->loop, &hc, err))) {
    ob_mcp_http_free(h);
    return NULL;
  }
  return h;
}

int ob_mcp_http_port(const ob_mcp_http *h) { return ob_httpd_port(h->http); }

const char *ob_mcp_http_token(const ob_mcp_http *h) { return h->token_made ? h->token : NULL; }

size_t ob_mcp_http_sessions(const ob_mcp_http *h) { return h->nsessions; }

void ob_mcp_http_close(ob_mcp_http *h) {
  if (!h || h->closed)
    return;
  h->closed = 1;
  while (h->sessions)
    session_end(h, h->sessions);
  ob_httpd_close(h->http); /* its connections close: each stream's gone frees its exchange */
}

void ob_mcp_http_free(ob_mcp_http *h) {
  if (!h)
    return;
  ob_mcp_http_close(h);
  ob_httpd_free(h->http);
  while (h->streams) /* those the server let go of without saying so */
    exchange_gone(h->streams);
  free(h->bind);
  free(h->token);
  free(h);
}
