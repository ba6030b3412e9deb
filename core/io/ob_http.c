/* ob_http.c -- HTTP transfers: libcurl's multi interface on the engine's
 * libuv loop (design and costs in ob_http.h).
 *
 * Transfers are spread over several multi handles (shards of 64): libcurl's
 * work for each socket event grows with the transfers its multi handle
 * holds, and 1,000 transfers in one cost a fifth more time than in 16.
 * Each shard has its own sockets, timer and connection cache; DNS answers
 * and TLS sessions are shared by all (a CURLSH).
 *
 * libcurl tells us what to watch: the socket callback asks for a socket to
 * be polled for reading, writing, both, or no more, and the timer callback
 * for when to call it back if nothing happens on any socket. Each watched
 * socket gets a uv_poll_t (its `sock` record, given to libcurl with
 * curl_multi_assign so that the next callback for that socket finds it);
 * each multi handle's one timeout is a uv_timer_t. When either fires,
 * curl_multi_socket_action does the work, then every finished transfer is
 * taken off the multi handle and its callback called.
 *
 * libcurl's callbacks never call libcurl again: the timer callback with 0 ms
 * only arms the uv timer (libcurl documents that calling socket_action from
 * inside it is not allowed). A transfer's callback may start and cancel
 * transfers: the finished ones are collected first, then called back one by
 * one, each taken off the list before its callback runs.
 *
 * A uv handle is closed asynchronously: a `sock` record goes in its close
 * callback, and the timer likewise, so ob_http_free returns at once and the
 * memory goes on the loop's next turn. */
#include <arpa/inet.h>
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "io/ob_curl.h"
#include "io/ob_http.h"
#include "base/ob_mem.h"

/* Easy handles of ended transfers kept for the next ones, at most. */
#define KEEP_EASY 1024
/* Transfers one multi handle holds at most: libcurl's work per socket event
 * grows with the transfers its multi handle holds, so many transfers are
 * spread over several, each with its sockets, timer and connections. */
#define SHARD 64
/* An answer's header lines, at most: libcurl's own limits (CURL_MAX_HTTP_HEADER, 100 KB
 * a line; 300 KB in all, its MAX_HTTP_RESP_HEADER_SIZE, which no option raises) come
 * first, and fail the transfer with "Out of memory" or "Too large response headers";
 * finish() names the limit instead. HEAD_MAX is what obelus keeps, the same 300 KB. */
#define HEAD_LINE_MAX ((size_t)100 << 10)
#define HEAD_MAX ((size_t)300 << 10)

typedef struct shard {
  struct ob_http *h;
  CURLM *multi;
  uv_timer_t *timer;
  size_t running;      /* its transfers */
  struct sock *socks;  /* watched, a list through next/prevp */
} shard;

struct ob_http {
  uv_loop_t *loop;
  CURLSH *share;
  shard **shards;
  size_t nshards;
  ob_http_xfer *xfers; /* in flight, a list through next/prevp */
  size_t active;
  size_t running;      /* handed to libcurl */
  ob_http_xfer *qhead, **qtail; /* waiting for their turn, through qnext */
  ob_http_xfer *failed; /* could not be handed over: called back from the loop */
  size_t max;          /* handed to libcurl at once, at most (ob_http_set_max) */
  size_t max_bytes;    /* a request's body limit when it gives none */
  int allow_private;   /* connect to what ob_http_denied names too */
  ob_mem *mem;         /* the account bodies and headers are charged to, or NULL */
  CURL *idle[KEEP_EASY]; /* easy handles of ended transfers, for the next ones */
  size_t nidle;
};

struct ob_http_xfer {
  ob_http *h;
  shard *sh;            /* the multi handle it is in, or NULL */
  CURL *easy;
  struct curl_slist *headers;
  ob_http_cb cb;
  void *ud;
  char *method, *url;
  FILE *file;           /* a download's */
  size_t got;
  ob_http_settings set; /* its limits, defaults filled in */
  int too_big;          /* the body passed max_bytes: the transfer was stopped */
  int no_memory;        /* a buffer could not grow: the transfer was stopped */
  int over_limit;       /* growing a buffer would pass h->mem's limit: likewise */
  size_t charged;       /* what its buffers hold of h->mem */
  int head_too_big;     /* the header lines passed HEAD_MAX: likewise */
  int in_head;          /* an answer's status line came and its header lines go on */
  char denied[160];     /* an address refused (ob_http_denied): why, or "" */
  int state;            /* IN_FLIGHT, then DONE (its callback to come), CANCELLED
                           (cancelled meanwhile: no callback), CALLING (in its callback) */
  ob_buf body;
  ob_buf head;          /* the last answer's header lines, "name\0value\0" */
  size_t nheaders;
  char errbuf[CURL_ERROR_SIZE];
  ob_http_xfer *next, **prevp;
  int follow, has_body;
  char *ca_file, *download;
  ob_buf send;          /* the request body */
  CURLcode fail_rc;     /* on h->failed: why */
  CURLcode result;      /* DONE: how libcurl ended it */
  int in_multi;         /* handed to libcurl */
  int queued;           /* waiting in h's queue */
  ob_http_xfer *qnext;
};

enum { IN_FLIGHT, DONE, CANCELLED, CALLING };

static void free_closed_sock(uv_handle_t *u);

typedef struct sock {
  uv_poll_t poll;
  shard *sh;
  curl_socket_t fd;
  struct sock *next, **prevp;
} sock;

static void sock_close(sock *s) {
  *s->prevp = s->next;
  if (s->next)
    s->next->prevp = s->prevp;
  uv_poll_stop(&s->poll);
  s->poll.data = s;
  uv_close((uv_handle_t *)&s->poll, free_closed_sock);
}

static void free_closed_sock(uv_handle_t *u) { free(u->data); }
static void free_closed_timer(uv_handle_t *u) { free(u); }

/* --- the process's part ------------------------------------------------- */

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_rc;
static char rlimit_note[200]; /* set once by global_init, read after it */
static atomic_int rlimit_told;

static void global_init(void) {
  global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
  struct rlimit rl; /* thousands of transfers at once: a socket each */
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
      snprintf(rlimit_note, sizeof rlimit_note, "http: cannot raise the open files limit from "
               "%llu (%s): at most that many transfers at once", (unsigned long long)was,
               strerror(errno));
  }
}

/* --- the loop's side -------------------------------------------------------- */

static void check_done(shard *sh);


static void on_poll(uv_poll_t *p, int status, int events) {
  sock *s = p->data;
  shard *sh = s->sh;
  int flags = 0;
  if (status < 0)
    flags = CURL_CSELECT_ERR;
  if (events & UV_READABLE)
    flags |= CURL_CSELECT_IN;
  if (events & UV_WRITABLE)
    flags |= CURL_CSELECT_OUT;
  int running;
  curl_multi_socket_action(sh->multi, s->fd, flags, &running);
  check_done(sh);
}

static void on_timer(uv_timer_t *t) {
  shard *sh = t->data;
  int running;
  curl_multi_socket_action(sh->multi, CURL_SOCKET_TIMEOUT, 0, &running);
  check_done(sh);
}

static int socket_cb(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp) {
  (void)easy;
  shard *sh = userp;
  sock *s = socketp;
  if (what == CURL_POLL_REMOVE) {
    if (s) {
      sock_close(s);
      curl_multi_assign(sh->multi, fd, NULL);
    }
    return 0;
  }
  if (!s) {
    s = calloc(1, sizeof *s);
    if (!s)
      return -1;
    s->sh = sh;
    s->fd = fd;
    if (uv_poll_init_socket(sh->h->loop, &s->poll, fd) != 0) {
      free(s);
      return -1;
    }
    s->poll.data = s;
    s->next = sh->socks;
    if (sh->socks)
      sh->socks->prevp = &s->next;
    s->prevp = &sh->socks;
    sh->socks = s;
    curl_multi_assign(sh->multi, fd, s);
  }
  int events = (what & CURL_POLL_IN ? UV_READABLE : 0) | (what & CURL_POLL_OUT ? UV_WRITABLE : 0);
  uv_poll_start(&s->poll, events, on_poll);
  return 0;
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp) {
  (void)multi;
  shard *sh = userp;
  if (timeout_ms < 0)
    uv_timer_stop(sh->timer);
  else
    uv_timer_start(sh->timer, on_timer, (uint64_t)timeout_ms, 0);
  return 0;
}

/* --- transfers ----------------------------------------------------------------- */

/* The timer keeps the loop alive while transfers run (before libcurl has
 * a socket to watch, it is all there is of them on the loop), and not after:
 * libcurl may leave a timeout set for its connection cache. */
static void hold(ob_http *h) {
  for (size_t i = 0; i < h->nshards; i++)
    if (h->active)
      uv_ref((uv_handle_t *)h->shards[i]->timer);
    else
      uv_unref((uv_handle_t *)h->shards[i]->timer);
}

static void unlink_xfer(ob_http_xfer *x) {
  if (!x->prevp)
    return;
  *x->prevp = x->next;
  if (x->next)
    x->next->prevp = x->prevp;
  x->prevp = NULL;
  x->next = NULL;
  x->h->active--;
  hold(x->h);
}

static void dequeue(ob_http_xfer *x) {
  ob_http *h = x->h;
  ob_http_xfer **pp = &h->qhead; /* cancelling a queued transfer: rare, a scan */
  while (*pp && *pp != x)
    pp = &(*pp)->qnext;
  if (*pp)
    *pp = x->qnext;
  if (h->qtail == &x->qnext)
    h->qtail = pp;
  x->queued = 0;
  x->qnext = NULL;
}

static void off_multi(ob_http_xfer *x) {
  if (!x->in_multi)
    return;
  curl_multi_remove_handle(x->sh->multi, x->easy);
  x->in_multi = 0;
  x->sh->running--;
  x->sh = NULL;
  x->h->running--;
}

static void free_xfer(ob_http_xfer *x) {
  unlink_xfer(x);
  if (x->queued)
    dequeue(x);
  if (x->fail_rc) { /* on h->failed (cancelled before its callback came) */
    ob_http_xfer **pp = &x->h->failed;
    while (*pp && *pp != x)
      pp = &(*pp)->qnext;
    if (*pp)
      *pp = x->qnext;
  }
  off_multi(x);
  if (x->easy && x->h->nidle < KEEP_EASY) {
    curl_easy_reset(x->easy); /* kept for a later transfer: no new handle to set up */
    x->h->idle[x->h->nidle++] = x->easy;
  } else if (x->easy) {
    curl_easy_cleanup(x->easy);
  }
  free(x->ca_file);
  free(x->download);
  ob_buf_free(&x->send);
  curl_slist_free_all(x->headers);
  if (x->file)
    fclose(x->file);
  ob_buf_free(&x->body);
  ob_buf_free(&x->head);
  if (x->charged)
    ob_mem_release_to(x->h->mem, x->charged);
  free(x->method);
  free(x->url);
  free(x);
}

/* Appends to a transfer's buffer (the answer's body and headers, the
 * request's body): the one place HTTP memory grows, so that a server or a
 * tool asking for too much fails its transfer (-1: x->no_memory set)
 * rather than the process (ob_buf_grow aborts). The growth is charged to the
 * engine's memory account (ob_http_set_mem): past --max-memory the transfer
 * fails (x->over_limit) with the account's message. */
static int xfer_buf_add(ob_http_xfer *x, ob_buf *b, const char *data, size_t len) {
  if (b->len + len + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + len + 1) {
      if (cap > SIZE_MAX / 2) {
        x->no_memory = 1;
        return -1;
      }
      cap *= 2;
    }
    /* the account is h's, named: curl's callbacks run outside any call */
    if (x->h->mem && ob_mem_charge_to(x->h->mem, cap - b->cap)) {
      x->over_limit = 1;
      return -1;
    }
    char *p = realloc(b->data, cap);
    if (!p) {
      if (x->h->mem)
        ob_mem_release_to(x->h->mem, cap - b->cap);
      x->no_memory = 1;
      return -1;
    }
    if (x->h->mem)
      x->charged += cap - b->cap;
    b->data = p;
    b->cap = cap;
  }
  memcpy(b->data + b->len, data, len);
  b->len += len;
  b->data[b->len] = '\0';
  return 0;
}

/* Bodies arrive decoded (CURLOPT_ACCEPT_ENCODING), so max_bytes counts what a
 * gzip bomb expands to, and an endless chunked body ends at it. */
static size_t on_body(char *data, size_t size, size_t n, void *ud) {
  ob_http_xfer *x = ud;
  size_t len = size * n;
  if (len > x->set.max_bytes - x->got) { /* got <= max_bytes always */
    x->too_big = 1;
    return 0; /* libcurl stops the transfer: CURLE_WRITE_ERROR */
  }
  x->got += len;
  if (x->file)
    return fwrite(data, 1, len, x->file);
  return xfer_buf_add(x, &x->body, data, len) ? 0 : len;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud) {
  ob_http_xfer *x = ud;
  size_t len = size * n;
  if (len >= 5 && !memcmp(data, "HTTP/", 5)) { /* a new answer (after a redirect, a 100) */
    x->head.len = 0;
    x->nheaders = 0;
    x->in_head = 1;
    return len;
  }
  const char *colon = memchr(data, ':', len);
  if (!colon) {
    if (len <= 2) /* the blank line at the end */
      x->in_head = 0;
    return len; /* nothing we keep */
  }
  if (x->head.len + len + 2 > HEAD_MAX) {
    x->head_too_big = 1;
    return 0;
  }
  const char *v = colon + 1, *end = data + len;
  while (v < end && (*v == ' ' || *v == '\t'))
    v++;
  while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
    end--;
  char name[256];
  size_t nlen = (size_t)(colon - data) < sizeof name ? (size_t)(colon - data) : sizeof name - 1;
  for (size_t i = 0; i < nlen; i++)
    name[i] = (char)tolower((unsigned char)data[i]);
  name[nlen] = '\0';
  /* a NUL inside a value would shift every later name and value: cut there */
  const char *nul = memchr(v, '\0', (size_t)(end - v));
  if (nul)
    end = nul;
  if (xfer_buf_add(x, &x->head, name, nlen + 1) ||
      xfer_buf_add(x, &x->head, v, (size_t)(end - v)) || xfer_buf_add(x, &x->head, "", 1))
    return 0;
  x->nheaders++;
  return len;
}

/* Every connection libcurl makes, redirects' included, is opened here, to the
 * address it resolved: the deny list holds whatever a name resolves to, with
 * no window between a check and the connect (no socket for a denied one). */
static curl_socket_t on_open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *a) {
  ob_http_xfer *x = ud;
  (void)purpose;
  const char *why = x->set.allow_private ? NULL : ob_http_denied(&a->addr);
  if (why) {
    char ip[INET6_ADDRSTRLEN] = "?";
    if (a->family == AF_INET)
      inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->addr)->sin_addr, ip, sizeof ip);
    else if (a->family == AF_INET6)
      inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->addr)->sin6_addr, ip, sizeof ip);
    snprintf(x->denied, sizeof x->denied, "%s is %s address, denied (--http-allow-private "
             "allows it)", ip, why);
    return CURL_SOCKET_BAD; /* libcurl tries the name's other addresses, if any */
  }
  return socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);
}

static void finish(ob_http_xfer *x, CURLcode rc) {
  ob_http_response res = {0};
  char why[CURL_ERROR_SIZE + 1024];
  const char **names = NULL, **values = NULL;
  char *eff = NULL;
  if (x->easy)
    curl_easy_getinfo(x->easy, CURLINFO_EFFECTIVE_URL, &eff);
  const char *via = eff && strcmp(eff, x->url) ? eff : NULL; /* a redirect's target */
  if (x->too_big) {
    snprintf(why, sizeof why, "%s %s: response body larger than %zu bytes (max_bytes)",
             x->method, x->url, x->set.max_bytes);
    res.error = why;
  } else if (x->over_limit) {
    snprintf(why, sizeof why, "%s %s: " OB_MEM_LIMIT_FMT " (the answer, %zu bytes so far)",
             x->method, x->url, x->h->mem->limit >> 20, x->got);
    res.error = why;
  } else if (x->no_memory) {
    snprintf(why, sizeof why, "%s %s: out of memory for the answer (%zu bytes so far)",
             x->method, x->url, x->got);
    res.error = why;
  } else if (x->head_too_big ||
             (rc == CURLE_RECV_ERROR && x->in_head && strstr(x->errbuf, "headers"))) {
    snprintf(why, sizeof why, "%s %s: response headers larger than %zu KB (the header limit: "
             "%zu KB in all, %zu KB a line)", x->method, x->url, HEAD_MAX >> 10, HEAD_MAX >> 10,
             HEAD_LINE_MAX >> 10);
    res.error = why;
  } else if (rc == CURLE_OUT_OF_MEMORY && x->in_head) {
    snprintf(why, sizeof why, "%s %s: a response header line longer than %zu KB (the header "
             "limit: %zu KB a line, %zu KB in all)", x->method, x->url, HEAD_LINE_MAX >> 10,
             HEAD_LINE_MAX >> 10, HEAD_MAX >> 10);
    res.error = why;
  } else if (rc != CURLE_OK && x->denied[0]) {
    snprintf(why, sizeof why, "%s %s: %s%s%.512s%s", x->method, x->url, x->denied,
             via ? " (redirected to " : "", via ? via : "", via ? ")" : "");
    res.error = why;
  } else if (rc != CURLE_OK) {
    snprintf(why, sizeof why, "%s %s: %s", x->method, x->url,
             x->errbuf[0] ? x->errbuf : curl_easy_strerror(rc));
    res.error = why;
  } else if (x->file && fflush(x->file) != 0) {
    snprintf(why, sizeof why, "%s %s: writing the download: %s", x->method, x->url,
             strerror(errno));
    res.error = why;
  }
  if (!res.error) {
    curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &res.status);
    res.url = eff ? eff : x->url;
    long v = 0;
    curl_easy_getinfo(x->easy, CURLINFO_HTTP_VERSION, &v);
    res.version = v == CURL_HTTP_VERSION_2_0 ? "2" : v == CURL_HTTP_VERSION_3 ? "3"
                  : v == CURL_HTTP_VERSION_1_0 ? "1.0" : "1.1";
    names = ob_xcalloc(x->nheaders + 1, sizeof *names);
    values = ob_xcalloc(x->nheaders + 1, sizeof *values);
    const char *p = x->head.data;
    for (size_t i = 0; i < x->nheaders; i++) {
      names[i] = p;
      p += strlen(p) + 1;
      values[i] = p;
      p += strlen(p) + 1;
    }
    res.nheaders = x->nheaders;
    res.names = names;
    res.values = values;
    res.body = x->file ? NULL : (x->body.data ? x->body.data : "");
    res.body_len = x->got;
  }
  x->cb(x->ud, &res);
  free(names);
  free(values);
}

static CURLcode setup_easy(ob_http_xfer *x);

/* Hands queued transfers to libcurl while there is room. One that cannot
 * be set up fails, called back from the loop (never from inside start). */
static shard *shard_new(ob_http *h);

/* A multi handle with room: the first that has some (the earlier ones fill
 * first, so few run while few transfers do), or a new one; NULL when out of
 * memory. */
static shard *shard_with_room(ob_http *h) {
  for (size_t i = 0; i < h->nshards; i++)
    if (h->shards[i]->running < SHARD)
      return h->shards[i];
  return shard_new(h);
}

static void pump(ob_http *h) {
  while (h->running < h->max && h->qhead) {
    ob_http_xfer *x = h->qhead;
    dequeue(x);
    shard *sh = shard_with_room(h);
    CURLcode rc = sh ? setup_easy(x) : CURLE_OUT_OF_MEMORY;
    if (rc == CURLE_OK && curl_multi_add_handle(sh->multi, x->easy) == CURLM_OK) {
      x->in_multi = 1;
      x->sh = sh;
      sh->running++;
      h->running++;
    } else if (h->nshards) {
      x->fail_rc = rc != CURLE_OK ? rc : CURLE_OUT_OF_MEMORY;
      x->qnext = h->failed;
      h->failed = x;
      uv_timer_start(h->shards[0]->timer, on_timer, 0, 0);
    } else { /* not even one multi handle: it waits for the next turn */
      x->queued = 1;
      x->qnext = h->qhead;
      h->qhead = x;
      if (h->qtail == &h->qhead)
        h->qtail = &x->qnext;
      return;
    }
  }
}

static void check_done(shard *sh) {
  ob_http *h = sh->h;
  while (h->failed) { /* those that could not be handed over */
    ob_http_xfer *x = h->failed;
    h->failed = x->qnext;
    x->qnext = NULL;
    CURLcode rc = x->fail_rc;
    x->fail_rc = CURLE_OK;
    unlink_xfer(x);
    x->state = CALLING;
    finish(x, rc);
    free_xfer(x);
  }
  /* the finished ones first: a callback may start or cancel others */
  ob_http_xfer *done = NULL, **tail = &done;
  CURLMsg *m;
  int left;
  while ((m = curl_multi_info_read(sh->multi, &left))) {
    if (m->msg != CURLMSG_DONE)
      continue;
    ob_http_xfer *x = NULL;
    curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&x);
    x->result = m->data.result;
    unlink_xfer(x);
    off_multi(x);
    x->state = DONE;
    *tail = x;
    tail = &x->next;
    *tail = NULL;
  }
  while (done) {
    ob_http_xfer *x = done;
    done = x->next;
    x->next = NULL;
    if (x->state == DONE) { /* not cancelled by an earlier one's callback */
      x->state = CALLING;
      finish(x, x->result);
    }
    free_xfer(x);
  }
  pump(h);
}

static shard *shard_new(ob_http *h) {
  shard **more = realloc(h->shards, (h->nshards + 1) * sizeof *more);
  shard *sh = calloc(1, sizeof *sh);
  if (more)
    h->shards = more;
  if (!more || !sh || !(sh->timer = malloc(sizeof *sh->timer)) ||
      !(sh->multi = curl_multi_init())) {
    if (sh)
      free(sh->timer);
    free(sh);
    return NULL;
  }
  sh->h = h;
  uv_timer_init(h->loop, sh->timer);
  sh->timer->data = sh;
  curl_multi_setopt(sh->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
  curl_multi_setopt(sh->multi, CURLMOPT_SOCKETDATA, sh);
  curl_multi_setopt(sh->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
  curl_multi_setopt(sh->multi, CURLMOPT_TIMERDATA, sh);
  curl_multi_setopt(sh->multi, CURLMOPT_MAXCONNECTS, (long)SHARD * 2);
  h->shards[h->nshards++] = sh;
  hold(h);
  return sh;
}

const char *ob_http_take_note(void) {
  if (!rlimit_note[0] || atomic_exchange(&rlimit_told, 1))
    return NULL;
  return rlimit_note;
}

ob_http *ob_http_new(uv_loop_t *loop, ob_error *err) {
  if (ob_curl_load(err) != OB_OK)
    return NULL;
  pthread_once(&global_once, global_init);
  if (global_rc != CURLE_OK) {
    ob_error_set(err, OB_EINVAL, 0, "http: libcurl cannot start: %s",
                 curl_easy_strerror(global_rc));
    return NULL;
  }
  ob_http *h = ob_xcalloc(1, sizeof *h);
  h->loop = loop;
  h->qtail = &h->qhead;
  h->max = OB_HTTP_MAX_DEFAULT;
  h->max_bytes = OB_HTTP_MAX_BYTES_DEFAULT;
  if (!(h->share = curl_share_init()) || !shard_new(h)) {
    if (h->share)
      curl_share_cleanup(h->share);
    free(h->shards);
    free(h);
    ob_error_set(err, OB_ENOMEM, 0, "http: out of memory");
    return NULL;
  }
  curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_DNS);
  curl_share_setopt(h->share, CURLSHOPT_SHARE, CURL_LOCK_DATA_SSL_SESSION);
  return h;
}

void ob_http_free(ob_http *h) {
  if (!h)
    return;
  h->failed = NULL; /* on the xfers list too */
  while (h->xfers)
    free_xfer(h->xfers); /* removing a handle may close its socket: socket_cb */
  while (h->nidle)
    curl_easy_cleanup(h->idle[--h->nidle]);
  for (size_t i = 0; i < h->nshards; i++) {
    shard *sh = h->shards[i];
    curl_multi_cleanup(sh->multi);
    while (sh->socks) /* connections libcurl kept, should it not have said so */
      sock_close(sh->socks);
    uv_timer_stop(sh->timer);
    uv_close((uv_handle_t *)sh->timer, free_closed_timer);
    free(sh);
  }
  curl_share_cleanup(h->share);
  free(h->shards);
  free(h);
}

size_t ob_http_active(const ob_http *h) { return h ? h->active : 0; }

void ob_http_set_max(ob_http *h, size_t max) {
  h->max = max ? max : OB_HTTP_MAX_DEFAULT;
  pump(h);
}

void ob_http_set_max_bytes(ob_http *h, size_t max_bytes) {
  h->max_bytes = max_bytes ? max_bytes : OB_HTTP_MAX_BYTES_DEFAULT;
}

void ob_http_set_allow_private(ob_http *h, int allow) { h->allow_private = allow != 0; }

void ob_http_set_mem(ob_http *h, ob_mem *mem) { h->mem = mem; }

void ob_http_settings_of(const ob_http *h, const ob_http_request *rq, ob_http_settings *out) {
  /* libcurl takes longs: a larger wish is as good as forever */
  out->timeout_ms = rq->timeout_ms ? rq->timeout_ms : OB_HTTP_TIMEOUT_DEFAULT;
  if (out->timeout_ms > (unsigned long)LONG_MAX)
    out->timeout_ms = (unsigned long)LONG_MAX;
  out->low_speed_limit = rq->low_speed_limit ? rq->low_speed_limit
                                             : OB_HTTP_LOW_SPEED_LIMIT_DEFAULT;
  out->low_speed_time = rq->low_speed_time ? rq->low_speed_time : OB_HTTP_LOW_SPEED_TIME_DEFAULT;
  if (out->low_speed_limit > (unsigned long)LONG_MAX)
    out->low_speed_limit = (unsigned long)LONG_MAX;
  if (out->low_speed_time > (unsigned long)LONG_MAX)
    out->low_speed_time = (unsigned long)LONG_MAX;
  out->max_bytes = rq->max_bytes           ? rq->max_bytes
                   : h && h->max_bytes ? h->max_bytes
                                           : OB_HTTP_MAX_BYTES_DEFAULT;
  out->allow_private = h ? h->allow_private : 0;
  out->max_redirects = OB_HTTP_MAX_REDIRECTS;
}

/* --- what is refused before anything is sent -------------------------------- */

/* RFC 9110's tchar: a method and a header name are made of these only. */
static int is_tchar(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         (c && strchr("!#$%&'*+-.^_`|~", c));
}

int ob_http_is_token(const char *s, size_t len) {
  for (size_t i = 0; i < len; i++)
    if (!is_tchar((unsigned char)s[i]))
      return 0;
  return len > 0;
}

const char *ob_http_quote(char *out, size_t cap, const char *s, size_t len) {
  size_t o = 0;
  out[o++] = '"';
  for (size_t i = 0; i < len && o + 8 < cap; i++) {
    unsigned char c = (unsigned char)s[i];
    if (i == 80) {
      memcpy(out + o, "...", 3);
      o += 3;
      break;
    }
    if (c == '"' || c == '\\')
      o += (size_t)snprintf(out + o, cap - o, "\\%c", c);
    else if (c == '\r')
      o += (size_t)snprintf(out + o, cap - o, "\\r");
    else if (c == '\n')
      o += (size_t)snprintf(out + o, cap - o, "\\n");
    else if (c < 0x20 || c == 0x7f)
      o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
    else
      out[o++] = (char)c;
  }
  out[o++] = '"';
  out[o] = '\0';
  return out;
}

int ob_http_check(const ob_http_request *rq, ob_error *err) {
  char q[400];
  const char *method = rq->method ? rq->method : "GET";
  size_t mlen = strlen(method);
  int ok = mlen > 0 && mlen <= 64;
  for (size_t i = 0; ok && i < mlen; i++)
    ok = is_tchar((unsigned char)method[i]);
  if (!ok)
    return ob_error_set(err, OB_EINVAL, 0, "http: method %s is not an HTTP method (1 to 64 "
                        "letters, digits or !#$%%&'*+-.^_`|~)",
                        ob_http_quote(q, sizeof q, method, mlen));
  const char *url = rq->url ? rq->url : "";
  if (!*url)
    return ob_error_set(err, OB_EINVAL, 0, "%s: no url", method);
  if (strncasecmp(url, "http://", 7) && strncasecmp(url, "https://", 8))
    return ob_error_set(err, OB_EINVAL, 0, "%s %s: only http:// and https:// URLs", method,
                        ob_http_quote(q, sizeof q, url, strlen(url)));
  for (const char *c = url; *c; c++)
    if ((unsigned char)*c <= 0x20 || *c == 0x7f)
      return ob_error_set(err, OB_EINVAL, 0, "%s %s: a URL has no space, line break or control "
                          "byte (%%-encode it)",
                          method, ob_http_quote(q, sizeof q, url, strlen(url)));
  for (size_t i = 0; i < rq->nheaders; i++) {
    const char *line = rq->headers[i], *end = line;
    while (is_tchar((unsigned char)*end))
      end++;
    if (end == line || (*end != ':' && !(*end == ';' && !end[1]))) /* "Name;": empty */
      return ob_error_set(err, OB_EINVAL, 0, "%s %s: header %s: its name is not an HTTP token "
                          "(letters, digits or !#$%%&'*+-.^_`|~)", method, url,
                          ob_http_quote(q, sizeof q, line, strcspn(line, ":")));
    if (strpbrk(end, "\r\n"))
      return ob_error_set(err, OB_EINVAL, 0, "%s %s: header %s: its value has a line break",
                          method, url, ob_http_quote(q, sizeof q, line, (size_t)(end - line)));
  }
  return OB_OK;
}

/* The rules of ob_http_denied for an IPv4 address (host order). */
static const char *denied_v4(uint32_t a) {
  if ((a >> 24) == 0)
    return "an unspecified (0.0.0.0/8)";
  if ((a >> 16) == 0xa9fe)
    return "a link-local (169.254.0.0/16: cloud metadata)";
  if (a == 0x646464c8)
    return "a cloud metadata (100.100.100.200)";
  if ((a >> 28) == 0xe)
    return "a multicast";
  if ((a >> 28) == 0xf)
    return "a reserved or broadcast";
  return NULL;
}

const char *ob_http_denied(const void *sa) {
  const struct sockaddr *a = sa;
  if (a->sa_family == AF_INET)
    return denied_v4(ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr));
  if (a->sa_family != AF_INET6)
    return "a non-IP";
  const unsigned char *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
  static const unsigned char zero[16], ec2[16] = {0xfd, 0x00, 0x0e, 0xc2, [14] = 0x02, 0x54},
                                       mapped[12] = {[10] = 0xff, [11] = 0xff},
                                       nat64[12] = {0x00, 0x64, 0xff, 0x9b};
  if (!memcmp(b, zero, 16))
    return "an unspecified (::)";
  if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80)
    return "a link-local (fe80::/10)";
  if (b[0] == 0xff)
    return "a multicast";
  if (!memcmp(b, ec2, 16))
    return "a cloud metadata (fd00:ec2::254)";
  /* an IPv4 address inside: mapped (::ffff:a.b.c.d), NAT64 (64:ff9b::), or the old
   * compatible form (::a.b.c.d) but ::1, loopback */
  if (!memcmp(b, mapped, 12) || !memcmp(b, nat64, 12) ||
      (!memcmp(b, zero, 12) && !(b[12] == 0 && b[13] == 0 && b[14] == 0 && b[15] == 1))) {
    uint32_t v4 = (uint32_t)b[12] << 24 | (uint32_t)b[13] << 16 | (uint32_t)b[14] << 8 | b[15];
    return denied_v4(v4);
  }
  return NULL;
}

void ob_http_cancel(ob_http_xfer *x) {
  if (!x || x->state == CALLING || x->state == CANCELLED)
    return; /* in its own callback: freed after it */
  if (x->state == DONE) {
    x->state = CANCELLED; /* waiting for its callback in check_done: freed there */
    return;
  }
  ob_http *h = x->h;
  free_xfer(x);
  pump(h);
}

/* The transfer's easy handle, made as it is handed to libcurl (a queued
 * transfer holds only its request): one reused from an ended transfer when
 * there is one. OB_OK, or the failure in x->errbuf. */
static CURLcode setup_easy(ob_http_xfer *x) {
  ob_http *h = x->h;
  if (x->download && !(x->file = fopen(x->download, "wb"))) {
    snprintf(x->errbuf, sizeof x->errbuf, "cannot write %s: %s", x->download, strerror(errno));
    return CURLE_WRITE_ERROR;
  }
  CURL *e = h->nidle ? h->idle[--h->nidle] : curl_easy_init();
  if (!e)
    return CURLE_OUT_OF_MEMORY;
  x->easy = e;
  CURLcode rc = curl_easy_setopt(e, CURLOPT_URL, x->url);
  curl_easy_setopt(e, CURLOPT_PRIVATE, (char *)x);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->errbuf);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(e, CURLOPT_SHARE, h->share);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
  curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, ""); /* every decoding libcurl has */
  curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, x->follow ? 1L : 0L);
  curl_easy_setopt(e, CURLOPT_MAXREDIRS, x->set.max_redirects);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, (long)x->set.timeout_ms);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, (long)x->set.low_speed_limit);
  curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, (long)x->set.low_speed_time);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
  curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, x);
  /* http and https only, redirects included: the _STR options since 7.85, the
   * bit masks before (libcurl is loaded at run time: either may be there) */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  if (rc == CURLE_OK &&
      (curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https") != CURLE_OK ||
       curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https") != CURLE_OK) &&
      (curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS)) !=
           CURLE_OK ||
       curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS)) !=
           CURLE_OK)) {
    snprintf(x->errbuf, sizeof x->errbuf, "this libcurl cannot limit redirects to http and https");
    rc = CURLE_UNKNOWN_OPTION;
  }
#pragma GCC diagnostic pop
  if (x->ca_file)
    curl_easy_setopt(e, CURLOPT_CAINFO, x->ca_file);
  if (!strcmp(x->method, "HEAD"))
    curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
  else if (strcmp(x->method, "GET") || x->has_body)
    curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, x->method);
  if (x->has_body) {
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)x->send.len);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, x->send.data ? x->send.data : "");
  }
  if (x->headers)
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
  return rc;
}

ob_http_xfer *ob_http_start(ob_http *h, const ob_http_request *rq, ob_http_cb cb, void *ud,
                            ob_error *err) {
  const char *method = rq->method ? rq->method : "GET";
  if (ob_http_check(rq, err) != OB_OK)
    return NULL;
  ob_http_xfer *x = ob_xcalloc(1, sizeof *x);
  x->h = h;
  x->cb = cb;
  x->ud = ud;
  x->method = ob_xstrdup(method);
  x->url = ob_xstrdup(rq->url);
  ob_http_settings_of(h, rq, &x->set);
  x->follow = rq->follow;
  x->has_body = rq->has_body;
  x->ca_file = rq->ca_file ? ob_xstrdup(rq->ca_file) : NULL;
  x->download = rq->download ? ob_xstrdup(rq->download) : NULL;
  ob_buf_init(&x->body);
  ob_buf_init(&x->head);
  ob_buf_init(&x->send);
  if (rq->has_body && xfer_buf_add(x, &x->send, rq->body ? rq->body : "", rq->body_len)) {
    ob_error_set(err, OB_ENOMEM, 0, "%s %s: out of memory for the request's body", method,
                 rq->url);
    free_xfer(x);
    return NULL;
  }
  for (size_t i = 0; i < rq->nheaders; i++) {
    struct curl_slist *l = curl_slist_append(x->headers, rq->headers[i]);
    if (!l) {
      ob_error_set(err, OB_ENOMEM, 0, "%s %s: out of memory", method, rq->url);
      free_xfer(x);
      return NULL;
    }
    x->headers = l;
  }
  x->next = h->xfers;
  if (h->xfers)
    h->xfers->prevp = &x->next;
  x->prevp = &h->xfers;
  h->xfers = x;
  h->active++;
  hold(h);
  x->queued = 1; /* in order behind those waiting already */
  *h->qtail = x;
  h->qtail = &x->qnext;
  pump(h);
  return x;
}
