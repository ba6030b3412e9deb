/* fuzz_mcp.c -- libFuzzer target: any bytes as what an MCP client sends `obelus mcp`,
 * fed to the server's line handler (ob_mcp_feed: split at newlines, bounded lines, then
 * ob_mcp_handle) on a real engine with two quick tools (echo, fail), split into two
 * reads at a place the input chooses; the runs it starts are run to their end on the
 * engine's loop. Nothing may crash or leak, every answer must be one JSON-RPC 2.0
 * object, or a batch's non-empty array of them, and a notification (no id) is never
 * answered. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/ob_engine.h"
#include "host/ob_mcp.h"

static ob_engine *E;

static const char TOOLS[] =
    "return {\n"
    "  { name = 'echo', run = function(call) return call.value end },\n"
    "  { name = 'fail', run = function(call) error('failed on purpose') end },\n"
    "}\n";

/* One JSON-RPC 2.0 object we send: an answer, or (not in a batch) a notification. */
static void check_message(const ob_value *v, int in_batch) {
  if (ob_typeof(v) != OB_OBJECT)
    abort();
  const ob_value *jv = ob_object_get(v, "jsonrpc", 7);
  if (!jv || ob_typeof(jv) != OB_STRING || strcmp(ob_string_ptr(jv), "2.0"))
    abort();
  /* an answer has an id (null for what could not be read) and a result or an error;
   * a notification we send (progress) has a method, and is never in a batch's array */
  const ob_value *id = ob_object_get(v, "id", 2);
  int res = ob_object_get(v, "result", 6) != NULL, err_ = ob_object_get(v, "error", 5) != NULL;
  int method = ob_object_get(v, "method", 6) != NULL;
  if ((!method || in_batch) && (!id || res == err_))
    abort();
}

static void answer(void *ud, const char *json, size_t len) {
  size_t *answers = ud;
  ob_error err;
  ob_value *v = ob_json_parse(json, len, &err);
  if (!v || memchr(json, '\n', len))
    abort();
  if (ob_typeof(v) == OB_ARRAY) { /* a batch's answers: never empty, at most its bound */
    size_t n = ob_array_len(v);
    if (!n || n > OB_MCP_MAX_BATCH)
      abort();
    for (size_t i = 0; i < n; i++)
      check_message(ob_array_get(v, i), 1);
  } else {
    check_message(v, 0);
  }
  ob_unref(v);
  (*answers)++;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  ob_error err;
  if (!(E = ob_engine_new(NULL, &err)))
    abort();
  char path[] = "/tmp/fuzz_mcp_tools_XXXXXX.lua";
  int fd = mkstemps(path, 4);
  if (fd < 0 || write(fd, TOOLS, sizeof TOOLS - 1) != (ssize_t)(sizeof TOOLS - 1))
    abort();
  close(fd);
  if (ob_engine_load_tools(E, path, &err) != OB_OK)
    abort();
  unlink(path);
  return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size) {
  size_t answers = 0;
  ob_mcp *m = ob_mcp_new(E, answer, &answers);
  /* the first byte: a small line bound now and then, and where the input is split */
  size_t cut = size ? data[0] % (size + 1) : 0;
  if (size && data[0] & 1)
    ob_mcp_set_max_line(m, 64 + data[0]);
  ob_mcp_feed(m, (const char *)data, cut);
  ob_mcp_feed(m, (const char *)data + cut, size - cut);
  ob_mcp_feed_end(m);
  /* the runs started: to their end (the tools never wait), at most this many turns */
  for (int turn = 0; ob_mcp_pending(m) && turn < 1000; turn++)
    uv_run(E->loop, UV_RUN_NOWAIT);
  ob_mcp_free(m);
  uv_run(E->loop, UV_RUN_NOWAIT); /* the closed handles */
  /* one line that holds no object gets one answer at most (a parse error) */
  if (size && !memchr(data, '\n', size) && !memchr(data, '{', size) && answers > 1)
    abort();
  return 0;
}
