/* fuzz_common.h -- what the engine fuzz targets (fuzz_run, fuzz_journal) share: one
 * engine for the whole process, with small tools in C and in Lua, and the test that
 * keeps an input from waiting on a timer (a fuzzer must never stall on a sleep). */
#ifndef FUZZ_COMMON_H
#define FUZZ_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "obelus.h"

static const char fuzz_tools_lua[] =
    "local obelus = require 'obelus'\n"
    "return {\n"
    "  { name = 'echo', run = function(c) return c.value end },\n"
    "  { name = 'fail', run = function(c) error(tostring(c.value), 0) end },\n"
    "  { name = 'yield', run = function(c) obelus.sleep(0) return c.value end },\n"
    "  { name = 'pick', run = function(c) return obelus.branch(tonumber(c.which) or 0, c.value) end },\n"
    "  { name = 'keys', run = function(c) local t = {} for k, v in pairs(c) do\n"
    "      if type(k) == 'string' and k:sub(1, 1) ~= '_' then t[k .. '\\0'] = v end end return t end },\n"
    "  { name = 'typed', schema = { type = 'object', properties = { value = { type = 'string',\n"
    "      pattern = '^[a-z]*$' } }, required = { 'value' } },\n"
    "    run = function(c) return { v = c.value, n = #c.value } end },\n"
    "}\n";

/* A C tool that completes at once with its params' "value" (null if none). */
static void fuzz_c_echo(obelus_call *call, const char *params_json, void *data) {
  (void)data;
  const char *v = strstr(params_json, "\"value\":");
  (void)v; /* the params as a whole are a fine result: always valid JSON */
  obelus_call_complete(call, params_json);
}

static void fuzz_c_fail(obelus_call *call, const char *params_json, void *data) {
  (void)params_json, (void)data;
  obelus_call_fail(call, "failed in C");
}

static void fuzz_c_bad(obelus_call *call, const char *params_json, void *data) {
  (void)params_json, (void)data;
  obelus_call_complete(call, "{\"a\":1,\"a\":2}"); /* duplicate keys: the call fails */
}

static obelus_engine *fuzz_engine(void) {
  static obelus_engine *e;
  if (e)
    return e;
  char path[] = "/tmp/obelus-fuzz-tools-XXXXXX.lua";
  int fd = mkstemps(path, 4);
  if (fd < 0 || write(fd, fuzz_tools_lua, sizeof fuzz_tools_lua - 1) < 0)
    abort();
  close(fd);
  if (obelus_engine_new(&e, NULL) != OBELUS_OK || obelus_engine_load_tools(e, path) != OBELUS_OK) {
    fprintf(stderr, "fuzz: engine: %s\n", e ? obelus_engine_errmsg(e) : "no engine");
    abort();
  }
  unlink(path);
  obelus_engine_set_max_memory(e, 256);
  obelus_engine_add_tool(e, "c_echo", NULL, fuzz_c_echo, NULL);
  obelus_engine_add_tool(e, "c_fail", NULL, fuzz_c_fail, NULL);
  obelus_engine_add_tool(e, "c_bad", NULL, fuzz_c_bad, NULL);
  return e;
}

/* Whether running this text could wait on a clock or read other files: a _retry
 * (its delays), a _timeout, a _delegate; "\u00" escapes could spell any of those. */
static int fuzz_may_wait(const unsigned char *data, size_t size) {
  static const char *const words[] = {"retry", "timeout", "delegate", "\\u00"};
  for (size_t w = 0; w < sizeof words / sizeof *words; w++)
    if (memmem(data, size, words[w], strlen(words[w])))
      return 1;
  return 0;
}

#endif
