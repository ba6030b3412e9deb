/* ob_redis.c -- a Redis connection on a libuv loop that comes back by itself
 * (design and costs in ob_redis.h).
 *
 * hiredis owns the socket and the context; its libuv adapter polls the socket.
 * A context lives from redisAsyncConnect to the moment hiredis frees it: after
 * on_connect with an error, after on_disconnect, or in redisAsyncFree (ours, at
 * close). We learn of each through those two callbacks and forget the context
 * there (r->ac = NULL); hiredis has by then called back every command pending on
 * it with a NULL reply, which our trampoline hands on with the reason.
 *
 * The socket is watched by our own glue for hiredis's event hooks (watch_*), not
 * by <hiredis/adapters/libuv.h>: the adapter of Debian 12's hiredis (0.14.1)
 * returns from its poll callback when libuv reports an error (POLLERR: a refused
 * connect, a reset), and libuv has stopped the poll by then, so the connection
 * is never seen to fail and the client hangs (upstream fixed this in 1.0). Ours
 * hands an error to hiredis as the events it was waiting for: its read or write
 * then meets the socket's error and it disconnects with the reason.
 *
 * States: ac NULL and the timer armed (down, waiting for the next attempt); ac set
 * and !up (connecting, then AUTH / SELECT / PING in flight); ac set and up. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hiredis/async.h>

#include "base/ob_mem.h"
#include "io/ob_redis.h"

#define BACKOFF_FIRST_MS 50
#define BACKOFF_MAX_MS 2000
#define MAX_HOPS 5 /* cluster redirects in a row at connect */

struct ob_redis {
  uv_loop_t *loop;
  char *url;
  ob_redis_addr u;
  ob_redis_handlers h;
  char *key;             /* the key whose slot's node we want (h.key, copied); NULL */
  char host[256];        /* where the next attempt goes: the URL's, or a MOVED's */
  int port;
  int leaving;           /* the current socket is being dropped for a redirect */
  int hop;               /* ...to go at once and silently to host:port */
  int hops;              /* redirects in a row at connect */
  redisAsyncContext *ac;
  uv_timer_t timer; /* the next attempt */
  int up, closing, failures;
  unsigned connects;
  char why[256];
};

typedef struct pending {
  ob_redis *r;
  ob_redis_cb cb;
  void *ud;
} pending;

int ob_redis_url_parse(const char *url, ob_redis_addr *out, ob_error *err) {
  memset(out, 0, sizeof *out);
  out->port = 6379;
  const char *s = url;
  if (!strncmp(s, "redis://", 8))
    s += 8;
  else if (strstr(s, "://"))
    return ob_error_set(err, OB_EINVAL, 0, "%s: not a redis:// URL", url);
  const char *at = strrchr(s, '@');
  if (at) {
    const char *colon = memchr(s, ':', (size_t)(at - s));
    size_t ulen = colon ? (size_t)(colon - s) : 0;
    const char *pw = colon ? colon + 1 : s;
    size_t plen = (size_t)(at - pw);
    if (ulen >= sizeof out->user || plen >= sizeof out->password)
      return ob_error_set(err, OB_EINVAL, 0, "%s: user or password too long", url);
    memcpy(out->user, s, ulen);
    memcpy(out->password, pw, plen);
    s = at + 1;
  }
  size_t hlen = strcspn(s, ":/");
  if (!hlen || hlen >= sizeof out->host)
    return ob_error_set(err, OB_EINVAL, 0, "%s: no host in the Redis URL", url);
  memcpy(out->host, s, hlen);
  s += hlen;
  if (*s == ':') {
    char *end;
    long port = strtol(s + 1, &end, 10);
    if (end == s + 1 || port < 1 || port > 65535)
      return ob_error_set(err, OB_EINVAL, 0, "%s: bad port in the Redis URL", url);
    out->port = (int)port;
    s = end;
  }
  if (*s == '/' && s[1]) {
    char *end;
    long db = strtol(s + 1, &end, 10);
    if (end == s + 1 || *end || db < 0 || db > 1000000)
      return ob_error_set(err, OB_EINVAL, 0, "%s: bad database number in the Redis URL", url);
    out->db = (int)db;
  } else if (*s && strcmp(s, "/")) {
    return ob_error_set(err, OB_EINVAL, 0, "%s: unexpected \"%s\" in the Redis URL", url, s);
  }
  return OB_OK;
}

static void attempt(uv_timer_t *t);

/* --- hiredis's event hooks on a uv_poll_t ----------------------------------------------------- */

typedef struct watch {
  uv_poll_t poll;
  redisAsyncContext *ac; /* NULL once hiredis let go of it */
  int events;            /* what hiredis waits for */
} watch;

static void on_poll(uv_poll_t *h, int status, int events) {
  watch *wt = h->data;
  int ev = status < 0 ? wt->events : events; /* an error: let a read or write meet it */
  if (wt->ac && (ev & UV_READABLE))
    redisAsyncHandleRead(wt->ac);
  if (wt->ac && (ev & UV_WRITABLE))
    redisAsyncHandleWrite(wt->ac);
  if (status < 0 && wt->ac && wt->events) /* libuv stopped the poll; hiredis still waits */
    uv_poll_start(&wt->poll, wt->events, on_poll);
}

static void watch_set(void *privdata, int add, int what) {
  watch *wt = privdata;
  wt->events = add ? wt->events | what : wt->events & ~what;
  if (wt->events)
    uv_poll_start(&wt->poll, wt->events, on_poll);
  else
    uv_poll_stop(&wt->poll);
}

static void watch_add_read(void *p) { watch_set(p, 1, UV_READABLE); }
static void watch_del_read(void *p) { watch_set(p, 0, UV_READABLE); }
static void watch_add_write(void *p) { watch_set(p, 1, UV_WRITABLE); }
static void watch_del_write(void *p) { watch_set(p, 0, UV_WRITABLE); }

static void watch_free(uv_handle_t *h) { free(h->data); }

static void watch_cleanup(void *privdata) {
  watch *wt = privdata;
  wt->ac = NULL;
  uv_close((uv_handle_t *)&wt->poll, watch_free);
}

static int watch_attach(redisAsyncContext *ac, uv_loop_t *loop) {
  watch *wt = calloc(1, sizeof *wt);
  if (!wt)
    return -1;
  if (uv_poll_init(loop, &wt->poll, ac->c.fd) != 0) {
    free(wt);
    return -1;
  }
  wt->poll.data = wt;
  wt->ac = ac;
  ac->ev.data = wt;
  ac->ev.addRead = watch_add_read;
  ac->ev.delRead = watch_del_read;
  ac->ev.addWrite = watch_add_write;
  ac->ev.delWrite = watch_del_write;
  ac->ev.cleanup = watch_cleanup;
  return 0;
}

static void schedule(ob_redis *r) {
  if (r->closing)
    return;
  unsigned shift = r->failures < 6 ? (unsigned)r->failures : 6;
  unsigned delay = BACKOFF_FIRST_MS << shift;
  if (delay > BACKOFF_MAX_MS)
    delay = BACKOFF_MAX_MS;
  delay = delay / 2 + (unsigned)rand() % (delay / 2 + 1); /* equal jitter */
  r->failures++;
  uv_timer_start(&r->timer, attempt, delay, 0);
}

static void went_down(ob_redis *r, const char *why) {
  r->up = 0;
  r->hops = 0;
  if (why && why != r->why)
    snprintf(r->why, sizeof r->why, "%s", why);
  if (r->closing)
    return;
  schedule(r);
  if (r->h.on_down)
    r->h.on_down(r->h.ud, r->why);
}

/* A cluster's redirect in reply rp ("MOVED 3999 127.0.0.1:6381", "ASK ...",
 * "TRYAGAIN ..."): drops the socket (once its pending replies are in), retargeted
 * to the node a MOVED names. 1 if rp was one. */
static int redirected(ob_redis *r, redisAsyncContext *ac, const redisReply *rp) {
  if (rp->type != REDIS_REPLY_ERROR || !rp->str)
    return 0;
  int moved = !strncmp(rp->str, "MOVED ", 6);
  if (!moved && strncmp(rp->str, "ASK ", 4) && strncmp(rp->str, "TRYAGAIN", 8))
    return 0;
  if (r->leaving)
    return 1;
  r->leaving = 1;
  snprintf(r->why, sizeof r->why, "%s", rp->str);
  if (moved) {
    const char *addr = strchr(rp->str + 6, ' '); /* after the slot */
    const char *colon = addr ? strrchr(addr, ':') : NULL;
    char *end;
    long port = colon ? strtol(colon + 1, &end, 10) : 0;
    if (addr && colon && end != colon + 1 && port > 0 && port <= 65535) {
      size_t hlen = (size_t)(colon - addr - 1);
      if (hlen && hlen < sizeof r->host && !(hlen == 1 && addr[1] == '?')) {
        memcpy(r->host, addr + 1, hlen);
        r->host[hlen] = '\0';
      }
      r->port = (int)port;
      r->hop = !r->up && r->hops < MAX_HOPS; /* at connect: straight there */
      snprintf(r->why, sizeof r->why, "the key's slot is on %.200s:%d (MOVED)", r->host, r->port);
    }
  }
  redisAsyncDisconnect(ac);
  return 1;
}

static void trampoline(redisAsyncContext *ac, void *reply, void *privdata) {
  pending *p = privdata;
  ob_redis *r = p->r;
  const char *why = NULL;
  if (reply && !r->closing && (r->leaving || redirected(r, ac, reply)))
    reply = NULL; /* this socket is being left: the command did not run here */
  if (!reply)
    why = r->closing ? "closed"
          : r->leaving ? r->why
          : (ac->c.errstr[0] ? ac->c.errstr : "connection lost");
  p->cb(p->ud, reply, why);
  free(p);
}

static void on_disconnect(const redisAsyncContext *ac, int status) {
  ob_redis *r = ac->data;
  r->ac = NULL;
  if (r->leaving && r->hop && !r->closing) { /* a redirect at connect: go there now */
    r->hops++;
    r->hop = 0;
    uv_timer_start(&r->timer, attempt, 0, 0);
    return;
  }
  if (r->leaving)
    ; /* r->why says where the slot went */
  else if (status == REDIS_OK && !r->closing)
    snprintf(r->why, sizeof r->why, "the connection was closed");
  else if (status != REDIS_OK)
    snprintf(r->why, sizeof r->why, "%s", ac->c.errstr[0] ? ac->c.errstr : "connection lost");
  went_down(r, r->why);
}

/* The handshake's last answer: PING's. AUTH's and SELECT's only check. */
static void handshake_step(void *ud, redisReply *rp, const char *why) {
  ob_redis *r = ud;
  if (!rp || r->closing)
    return; /* the connection went: on_disconnect tells */
  if (rp->type == REDIS_REPLY_ERROR) {
    snprintf(r->why, sizeof r->why, "%s", rp->str);
    if (r->ac)
      redisAsyncDisconnect(r->ac);
  }
  (void)why;
}

static void handshake_done(void *ud, redisReply *rp, const char *why) {
  ob_redis *r = ud;
  (void)why;
  if (!rp || r->closing || !r->ac)
    return;
  if (rp->type == REDIS_REPLY_ERROR) {
    snprintf(r->why, sizeof r->why, "%s", rp->str);
    redisAsyncDisconnect(r->ac);
    return;
  }
  r->up = 1;
  r->failures = 0;
  r->hops = 0;
  r->connects++;
  if (r->h.on_up)
    r->h.on_up(r->h.ud);
}

static int send_raw(ob_redis *r, ob_redis_cb cb, void *ud, int argc, const char **argv,
                    const size_t *lens) {
  pending *p = malloc(sizeof *p);
  if (!p)
    return OB_ENOMEM;
  *p = (pending){r, cb, ud};
  if (redisAsyncCommandArgv(r->ac, trampoline, p, argc, argv, lens) != REDIS_OK) {
    free(p);
    return OB_EIO;
  }
  return OB_OK;
}

static void on_connect(const redisAsyncContext *ac, int status) {
  ob_redis *r = ac->data;
  if (status != REDIS_OK) {
    /* hiredis frees the context after this returns (the handshake's commands are
     * called back first); on_disconnect is not called */
    r->ac = NULL;
    snprintf(r->why, sizeof r->why, "%s", ac->c.errstr[0] ? ac->c.errstr : "cannot connect");
    went_down(r, r->why);
  }
}

/* AUTH, SELECT, PING (or EXISTS key: see the opening comment): queued at once,
 * sent when the socket connects (hiredis watches a connecting socket only once it
 * has something to write). */
static void handshake(ob_redis *r) {
  char db[16];
  snprintf(db, sizeof db, "%d", r->u.db);
  if (r->u.password[0]) {
    const char *argv[] = {"AUTH", r->u.user, r->u.password};
    if (r->u.user[0])
      send_raw(r, handshake_step, r, 3, argv, NULL);
    else
      send_raw(r, handshake_step, r, 2, (const char *[]){"AUTH", r->u.password}, NULL);
  }
  if (r->u.db)
    send_raw(r, handshake_step, r, 2, (const char *[]){"SELECT", db}, NULL);
  if (r->key)
    send_raw(r, handshake_done, r, 2, (const char *[]){"EXISTS", r->key}, NULL);
  else
    send_raw(r, handshake_done, r, 1, (const char *[]){"PING"}, NULL);
}

static void attempt(uv_timer_t *t) {
  ob_redis *r = t->data;
  if (r->closing || r->ac)
    return;
  r->leaving = r->hop = 0;
  redisAsyncContext *ac = redisAsyncConnect(r->host, r->port);
  if (!ac) {
    went_down(r, "out of memory");
    return;
  }
  if (ac->err) {
    snprintf(r->why, sizeof r->why, "%s", ac->errstr);
    redisAsyncFree(ac);
    went_down(r, r->why);
    return;
  }
  ac->data = r;
  if (watch_attach(ac, r->loop) != 0) {
    redisAsyncFree(ac);
    went_down(r, "cannot watch the socket");
    return;
  }
  r->ac = ac;
  redisAsyncSetConnectCallback(ac, on_connect);
  redisAsyncSetDisconnectCallback(ac, on_disconnect);
  handshake(r);
}

ob_redis *ob_redis_open(uv_loop_t *loop, const char *url, const ob_redis_handlers *h,
                        ob_error *err) {
  ob_redis *r = calloc(1, sizeof *r);
  if (!r || !(r->url = strdup(url))) {
    free(r);
    ob_error_set(err, OB_ENOMEM, 0, "out of memory");
    return NULL;
  }
  if (ob_redis_url_parse(url, &r->u, err) != OB_OK) {
    free(r->url);
    free(r);
    return NULL;
  }
  r->loop = loop;
  if (h)
    r->h = *h;
  if (r->h.key && !(r->key = strdup(r->h.key))) {
    free(r->url);
    free(r);
    ob_error_set(err, OB_ENOMEM, 0, "out of memory");
    return NULL;
  }
  r->h.key = r->key;
  snprintf(r->host, sizeof r->host, "%s", r->u.host);
  r->port = r->u.port;
  uv_timer_init(loop, &r->timer);
  r->timer.data = r;
  uv_timer_start(&r->timer, attempt, 0, 0);
  return r;
}

int ob_redis_send(ob_redis *r, ob_redis_cb cb, void *ud, int argc, const char **argv,
                  const size_t *lens) {
  if (!r->up || !r->ac || r->closing)
    return OB_EIO;
  return send_raw(r, cb, ud, argc, argv, lens);
}

int ob_redis_sendf(ob_redis *r, ob_redis_cb cb, void *ud, const char *fmt, ...) {
  if (!r->up || !r->ac || r->closing)
    return OB_EIO;
  pending *p = malloc(sizeof *p);
  if (!p)
    return OB_ENOMEM;
  *p = (pending){r, cb, ud};
  va_list ap;
  va_start(ap, fmt);
  int rc = redisvAsyncCommand(r->ac, trampoline, p, fmt, ap);
  va_end(ap);
  if (rc != REDIS_OK) {
    free(p);
    return OB_EIO;
  }
  return OB_OK;
}

void ob_redis_ignore_reply(void *ud, redisReply *reply, const char *why) {
  (void)ud;
  (void)reply;
  (void)why;
}

int ob_redis_is_up(const ob_redis *r) { return r->up; }
uv_loop_t *ob_redis_loop(const ob_redis *r) { return r->loop; }
const char *ob_redis_url(const ob_redis *r) { return r->url; }
const char *ob_redis_why(const ob_redis *r) { return r->why; }
unsigned ob_redis_connects(const ob_redis *r) { return r->connects; }

static void free_redis(uv_handle_t *h) {
  ob_redis *r = h->data;
  free(r->key);
  free(r->url);
  free(r);
}

void ob_redis_close(ob_redis *r) {
  if (!r || r->closing)
    return;
  r->closing = 1;
  r->up = 0;
  if (r->ac) {
    redisAsyncContext *ac = r->ac;
    r->ac = NULL;
    redisAsyncFree(ac); /* calls back what is pending: "closed" */
  }
  uv_close((uv_handle_t *)&r->timer, free_redis);
}

const char *ob_redis_str(const redisReply *rp) {
  if (!rp)
    return NULL;
  if (rp->type == REDIS_REPLY_STRING || rp->type == REDIS_REPLY_STATUS ||
      rp->type == REDIS_REPLY_ERROR)
    return rp->str;
  return NULL;
}

long long ob_redis_int(const redisReply *rp, long long def) {
  if (!rp)
    return def;
  if (rp->type == REDIS_REPLY_INTEGER)
    return rp->integer;
  if (rp->type == REDIS_REPLY_STRING && rp->len > 0) {
    char *end;
    long long v = strtoll(rp->str, &end, 10);
    if (*end == '\0')
      return v;
  }
  return def;
}
