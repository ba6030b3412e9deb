/* ob_cmd_redis.h -- how the queue commands (submit, wait, status, log --redis)
 * reach Redis: a connection on the command's loop that must come up at once
 * (else exit 3, naming the URL) and then reconnects by itself, saying so on
 * stderr, calling again() after each reconnection. ob_cmd_queue.c. */
#ifndef OB_CMD_REDIS_H
#define OB_CMD_REDIS_H

#include <uv.h>

#include "io/ob_redis.h"

typedef struct ob_cmd_redis {
  const char *cmd;
  ob_redis *r;
  int up, failed;
  void (*again)(void *ud); /* after a reconnection; NULL: nothing */
  void *ud;
} ob_cmd_redis;

/* Connects c->r to url on loop for queue q (on a Redis Cluster: to the node that
 * owns q's slot), running the loop until it is up: OB_EXIT_OK, or OB_EXIT_USAGE
 * (a bad URL) / OB_EXIT_UNAVAILABLE said on stderr. */
int ob_cmd_redis_connect(ob_cmd_redis *c, uv_loop_t *loop, const char *url, const char *q);
/* Closes the connection and lets the loop close its handles. */
void ob_cmd_redis_close(ob_cmd_redis *c, uv_loop_t *loop);

#endif
