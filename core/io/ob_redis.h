/* ob_redis.h -- one connection to Redis on a libuv loop: hiredis's async API
 * with its socket watched by a uv_poll_t (every byte moves on the loop that runs
 * the engine; no thread of ours blocks; why not hiredis's own libuv adapter:
 * ob_redis.c), plus what hiredis leaves to its user: a URL, AUTH and SELECT at
 * connect, and reconnecting with backoff.
 *
 * Design
 * ------
 * A connection is up (commands go out), connecting, or down waiting for its
 * next attempt. A lost connection -- Redis restarted, the network cut -- calls
 * back every command sent and not answered with reply NULL and the reason (it
 * may or may not have run: the owner knows whether running it twice harms),
 * says so through on_down once, and tries again after 50 ms, doubling up to
 * 2 s, with jitter. on_up is called after each (re)connect, once AUTH and
 * SELECT have answered: the owner's cue to send again what its state needs
 * (a worker re-ships its journals, a waiter re-reads). Commands sent while the
 * connection is not up are refused at once (OB_EIO), not queued: what to do
 * then is the owner's decision, and a queue of stale commands behind a
 * restart is the cause of more bugs than it saves.
 *
 * A blocking command (XREADGROUP BLOCK, XREAD BLOCK) holds the connection
 * until it answers: give such reads a connection of their own.
 *
 * Redis Cluster: a connection opened with a key (ob_redis_handlers.key) is bound
 * to the node that owns the key's slot, found by following MOVED (ob_redis.c).
 *
 * Costs: one socket, one uv_poll_t (the adapter's) and one uv_timer_t; per
 * command, hiredis's formatted copy of it and a callback record (ours: a few
 * words). Replies are hiredis's redisReply trees, valid during the callback
 * only.
 *
 * Threads: everything on the loop's thread. */
#ifndef OB_REDIS_H
#define OB_REDIS_H

#include <hiredis/hiredis.h>
#include <stddef.h>
#include <uv.h>

#include "base/ob_error.h"

typedef struct ob_redis ob_redis;

/* A command's answer: reply (an error reply is a reply: type REDIS_REPLY_ERROR),
 * or reply NULL and why ("connection lost: ...", "closed"). Called once per
 * command ob_redis_send accepted, from the loop, or from ob_redis_close. */
typedef void (*ob_redis_cb)(void *ud, redisReply *reply, const char *why);

typedef struct ob_redis_handlers {
  void (*on_up)(void *ud);                  /* connected (again), ready for commands */
  void (*on_down)(void *ud, const char *why); /* a connection or attempt failed */
  void *ud;
  /* A key the connection's commands are about (copied), or NULL. With it, the URL
   * may name any node of a Redis Cluster: the connection goes to the node that owns
   * the key's slot and follows it when it moves (ob_redis.c), so every command sent
   * on it must be about keys of that slot (one hash tag). Against a plain Redis it
   * changes nothing. */
  const char *key;
} ob_redis_handlers;

/* Parses url: redis://[[user]:password@]host[:port][/db] (port 6379, db 0), or
 * host:port. OB_OK, or OB_EINVAL with err quoting it. */
typedef struct ob_redis_addr {
  char host[256];
  int port, db;
  char user[128], password[256];
} ob_redis_addr;
int ob_redis_url_parse(const char *url, ob_redis_addr *out, ob_error *err);

/* Starts connecting to url on loop; h (copied) hears of it. NULL with err for a
 * bad URL or no memory: an unreachable server is not an error here but an
 * on_down, then attempts again. */
ob_redis *ob_redis_open(uv_loop_t *loop, const char *url, const ob_redis_handlers *h,
                        ob_error *err);

/* Sends a command (argv, lens: its words; lens NULL for C strings). OB_OK (cb will
 * be called), or OB_EIO when the connection is not up (cb will not be). */
int ob_redis_send(ob_redis *r, ob_redis_cb cb, void *ud, int argc, const char **argv,
                  const size_t *lens);
/* The same with hiredis's format ("SET %s %b", key, buf, len). */
int ob_redis_sendf(ob_redis *r, ob_redis_cb cb, void *ud, const char *fmt, ...);
/* A callback for a command whose reply nobody needs: does nothing. */
void ob_redis_ignore_reply(void *ud, redisReply *reply, const char *why);

int ob_redis_is_up(const ob_redis *r);
uv_loop_t *ob_redis_loop(const ob_redis *r);
/* The URL as given. */
const char *ob_redis_url(const ob_redis *r);
/* Why the last connection or attempt failed ("" before any did). */
const char *ob_redis_why(const ob_redis *r);
/* Connections made so far (1 after the first, more after reconnects). */
unsigned ob_redis_connects(const ob_redis *r);

/* Ends the connection: every command not answered is called back with reply NULL and
 * "closed" before this returns; no handler is called after. Its handles close on
 * the loop's next turn. NULL is allowed. */
void ob_redis_close(ob_redis *r);

/* Reply helpers: the reply's string (NULL unless a string, status or error reply),
 * its integer (also from a string holding one; def otherwise). */
const char *ob_redis_str(const redisReply *rp);
long long ob_redis_int(const redisReply *rp, long long def);

#endif
