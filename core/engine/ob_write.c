/* ob_write.c -- writing a call's result to the log.
 *
 * What a tool returns becomes output messages: a plain value goes to every
 * path of the first alternative of its _outputPath (obelus.branch picks
 * another, and must be what the tool returns once it was called: made and
 * dropped, it fails the call rather than write the first; an error goes to
 * the last when there are two or more), and
 * obelus.message values place themselves, each on a path the _outputPath
 * declares. A call's writes are all made or none: when there are several, or
 * a document has a schema, each is tried on a preview first. A call without
 * _outputPath (fire-and-forget, a thought) writes nothing.
 *
 * Costs: one conversion of the result from Lua, one append per path. */
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "engine/ob_sched.h"
#include "bridge/ob_lua.h"

typedef struct out_write {
  const char *kind;
  char *own_kind; /* kind copied from an obelus.message */
  ob_value *path_text; /* the path's canonical text when known (borrowed from the plan) */
  ob_path path;
  int own_path; /* path allocated here */
  ob_method method;
  ob_value *value;
} out_write;

static int has_metatable(lua_State *co, int idx, int ref) {
  if (!lua_getmetatable(co, idx))
    return 0;
  lua_rawgeti(co, LUA_REGISTRYINDEX, ref);
  int same = lua_rawequal(co, -1, -2);
  lua_pop(co, 2);
  return same;
}

/* Does (kind, path) land on a path of the call's _outputPath? */
static int declared(const ob_call *call, const char *kind, const ob_path *p) {
  for (size_t a = 0; a < call->output.n; a++)
    for (size_t k = 0; k < call->output.alts[a].n; k++) {
      const ob_reference *x = &call->output.alts[a].refs[k];
      if (!strcmp(x->kind, kind) && ob_path_is_prefix(&x->path, p))
        return 1;
    }
  return 0;
}

/* Reads an obelus.message table at idx into w. */
static int read_message(ob_crun *c, lua_State *co, int idx, out_write *w, ob_buf *why) {
  idx = lua_absindex(co, idx);
  lua_getfield(co, idx, "kind");
  lua_getfield(co, idx, "path");
  lua_getfield(co, idx, "method");
  lua_getfield(co, idx, "instance");
  /* the lengths Lua knows: a NUL inside would cut the C text short ("state\0junk"
   * read as state), so such a field fails the call instead */
  size_t kind_n = 0, path_n = 0, method_n = 0, inst_n = 0;
  const char *kind = lua_tolstring(co, -4, &kind_n), *path = lua_tolstring(co, -3, &path_n);
  const char *method = lua_tolstring(co, -2, &method_n);
  const char *inst = lua_isnil(co, -1) ? NULL : lua_tolstring(co, -1, &inst_n);
  const char *nul = !kind || memchr(kind, '\0', kind_n) ? "kind"
                    : !path || memchr(path, '\0', path_n) ? "path"
                    : !method || memchr(method, '\0', method_n) ? "method"
                    : inst && memchr(inst, '\0', inst_n) ? "instance" : NULL;
  int rc = 0;
  ob_error err;
  int m = nul ? -1 : ob_method_parse(method, method_n);
  if (nul)
    ob_buf_addf(why, "obelus.message: %s must be a string without a NUL byte (\\u0000)", nul);
  else if (inst && (!c->call->instance || strcmp(inst, c->call->instance)))
    ob_buf_addf(why, "obelus.message: a message stays in the call's instance");
  else if (m < 0)
    ob_buf_addf(why, "obelus.message: unknown method \"%s\"", method);
  else if (ob_path_parse(path, path_n, &w->path, &err) != OB_OK)
    ob_buf_addf(why, "obelus.message: path: %s", err.msg);
  else if (!declared(c->call, kind, &w->path)) {
    ob_buf_addf(why, "obelus.message writes %s.%s, which is not on the call's _outputPath", kind,
                path);
    ob_path_free(&w->path);
  } else {
    w->kind = w->own_kind = strdup(kind);
    if (!w->own_kind)
      abort();
    w->own_path = 1;
    w->method = (ob_method)m;
    lua_getfield(co, idx, "value");
    w->value = ob_lua_to_value_named(co, -1, "message value", &err);
    lua_pop(co, 1);
    if (!w->value) {
      ob_buf_addf(why, "%s", err.msg);
      ob_path_free(&w->path);
      free(w->own_kind);
    } else {
      rc = 1;
    }
  }
  lua_pop(co, 4);
  return rc;
}

/* Which || alternative obelus.branch named (0-based), or -1 with why filled. */
static long pick_branch(ob_crun *c, lua_State *co, int idx, ob_buf *why) {
  const ob_expr *out = &c->call->output;
  lua_getfield(co, idx, "which");
  long alt = -1;
  if (lua_isinteger(co, -1)) {
    lua_Integer n = lua_tointeger(co, -1);
    if (n >= 1 && (size_t)n <= out->n)
      alt = (long)n - 1;
    else
      ob_buf_addf(why, "obelus.branch(%lld): the _outputPath has %zu alternative%s", (long long)n,
                  out->n, out->n == 1 ? "" : "s");
  } else {
    size_t n = 0;
    const char *s = lua_tolstring(co, -1, &n);
    ob_expr e;
    ob_error err;
    if (s && memchr(s, '\0', n)) {
      ob_buf_addf(why, "obelus.branch: an alternative as written holds no NUL byte (\\u0000)");
      lua_pop(co, 1);
      return -1;
    }
    if (s && ob_expr_parse(s, n, OB_EXPR_OUTPUT, &e, &err) == OB_OK) {
      for (size_t a = 0; alt < 0 && e.n == 1 && a < out->n; a++) {
        int same = out->alts[a].n == e.alts[0].n;
        for (size_t k = 0; same && k < e.alts[0].n; k++)
          same = !strcmp(out->alts[a].refs[k].kind, e.alts[0].refs[k].kind) &&
                 ob_path_equal(&out->alts[a].refs[k].path, &e.alts[0].refs[k].path);
        if (same)
          alt = (long)a;
      }
      ob_expr_free(&e);
    }
    if (alt < 0)
      ob_buf_addf(why, "obelus.branch(\"%s\"): no such alternative in the _outputPath", s);
  }
  lua_pop(co, 1);
  return alt;
}

/* The bytes a write adds to the log besides its value (which the result
 * holds already): a concat copies the array's slots (8 bytes each, and a
 * trie node per 32), a merge or assign an object's entries. */
static size_t write_cost(ob_method method, const ob_value *v) {
  ob_type t = ob_typeof(v);
  if (method == OB_METHOD_CONCAT && t == OB_ARRAY)
    return ob_array_len(v) * (sizeof(void *) + 1);
  if ((method == OB_METHOD_MERGE || method == OB_METHOD_ASSIGN) && t == OB_OBJECT)
    return ob_object_len(v) * 4 * sizeof(void *);
  return 0;
}

/* Checks every write (its method, the document's schema), then makes them all:
 * a call's outputs are written entirely or not at all. */
static int commit_writes(ob_crun *c, out_write *w, size_t n, ob_buf *why, int *structural) {
  ob_run *r = c->run;
  ob_mem_cur = &r->e->mem; /* the run's engine's account (a C tool completes here too) */
  const char *inst = c->call->instance;
  for (size_t i = 0; i < n; i++) { /* the journal's line nests the value under its path */
    size_t depth = 1 + w[i].path.n + ob_depth(w[i].value);
    if (depth > OB_JOURNAL_MAX_DEPTH) {
      ob_buf_addf(why, "the result written to %s is nested %zu levels deep at its path, and a "
                       "journal's message holds at most %d", w[i].kind, depth, OB_JOURNAL_MAX_DEPTH);
      return 0;
    }
  }
  size_t need = 0; /* what the writes add to the memory account, near enough */
  for (size_t i = 0; i < n; i++) {
    size_t size = r->opt.max_output ? ob_json_size(w[i].value, r->opt.max_output) : 0;
    if (size > r->opt.max_output) {
      ob_buf_addf(why, "the result written to %s is over %zu KB (--max-output %zu)", w[i].kind,
                  r->opt.max_output >> 10, r->opt.max_output >> 10);
      return 0;
    }
    need += size + write_cost(w[i].method, w[i].value);
  }
  /* the memory account (ob_mem.h): the result's values are in it already;
   * the write must leave room for its text (the journal's record holds it a
   * moment) and the log's new nodes, or it is not made */
  if (ob_mem_would_pass(ob_mem_cur, need)) {
    ob_buf_addf(why, OB_MEM_LIMIT_FMT, ob_mem_limit_mb());
    return 0;
  }
  /* a single write without a schema is atomic by itself: no need to try it first */
  int precheck = n > 1;
  for (size_t i = 0; !precheck && i < n; i++)
    precheck = ob_log_schema(r->log, w[i].kind, inst, OB_LOG_NOW) != NULL;
  for (size_t i = 0; precheck && i < n; i++) {
    ob_error err;
    ob_value *after = ob_log_preview(r->log, w[i].kind, inst, &w[i].path, w[i].method,
                                     w[i].value, &err);
    if (!after) {
      ob_buf_addf(why, "writing %s: %s", w[i].kind, err.msg);
      return 0;
    }
    ob_value *schema = ob_log_schema(r->log, w[i].kind, inst, OB_LOG_NOW);
    if (schema) {
      char key[sizeof schema];
      memcpy(key, &schema, sizeof schema);
      ob_schema *s = ob_map_get(&r->schemas, key, sizeof key);
      if (!s && (s = ob_schema_compile(schema, &err)))
        ob_map_put(&r->schemas, key, sizeof key, s);
      if (!s) { /* fails closed: a schema that does not compile allows no write */
        ob_buf_addf(why, "the %s schema is not usable: %s", w[i].kind, err.msg);
        *structural = 1;
        ob_unref(after);
        return 0;
      }
      ob_schema_result res = {0};
      if (s && !ob_schema_validate(s, after, &res)) {
        ob_buf_addf(why, "the write breaks the %s schema: %s: %s: %s", w[i].kind,
                    res.fail[0].instance_path[0] ? res.fail[0].instance_path : "(root)",
                    res.fail[0].keyword, res.fail[0].message);
        *structural = 1;
      }
      ob_schema_result_free(&res);
    }
    ob_unref(after);
    if (*structural)
      return 0;
  }
  for (size_t i = 0; i < n; i++) {
    ob_error err;
    long pos = ob_log_append_output_text(r->log, w[i].kind, inst, &w[i].path, w[i].path_text,
                                         w[i].method, w[i].value, ob_crun_raw(c), &err);
    if (pos < 0) {
      ob_run_sync_journal(r);
      ob_buf_addf(why, "writing %s: %s", w[i].kind, err.msg);
      return 0;
    }
    if (ob_crun_sublog(c) && i == 0)
      ob_log_attach(r->log, (size_t)pos, ob_crun_sublog(c));
  }
  ob_run_sync_journal(r);
  return 1;
}

/* Releases writes (and w itself, when heap: else it is the caller's buffer). */
static void free_writes(out_write *w, size_t n, int heap) {
  for (size_t i = 0; i < n; i++) {
    if (w[i].own_path)
      ob_path_free(&w[i].path);
    free(w[i].own_kind);
    ob_unref(w[i].value);
  }
  if (heap)
    free(w);
}

/* Makes the writes (all or none) and settles the call: done, or failed. */
static void finish_writes(ob_crun *c, out_write *w, size_t n, int heap) {
  ob_buf why;
  ob_buf_init(&why);
  int structural = 0;
  if (commit_writes(c, w, n, &why, &structural)) {
    free_writes(w, n, heap);
    ob_buf_free(&why);
    ob_crun_settle(c, OB_CALL_DONE, NULL);
    return;
  }
  free_writes(w, n, heap);
  ob_crun_fail(c, structural ? "structural" : "runtime", why.data);
  ob_buf_free(&why);
}

/* Writes value (borrowed) to each path of alternative `alt` and settles the call. */
void ob_crun_write_alt(ob_crun *c, size_t alt, ob_value *value) {
  const ob_alt *a = &c->call->output.alts[alt];
  out_write inline_w[4], *w = a->n <= 4 ? inline_w : ob_xmalloc(a->n * sizeof *w);
  memset(w, 0, a->n * sizeof *w);
  size_t first = 0; /* the alternative's first part, alternatives flattened */
  for (size_t x = 0; x < alt; x++)
    first += c->call->output.alts[x].n;
  for (size_t k = 0; k < a->n; k++) {
    w[k].kind = a->refs[k].kind;
    w[k].path_text = c->call->output_text[first + k];
    w[k].path = a->refs[k].path;
    w[k].method = c->call->method;
    w[k].value = ob_ref(value);
  }
  ob_run *r = c->run;
  const ob_value *outer = r->written; /* a delegated run settles inside: keep the caller's */
  r->written = value; /* for the done event (ob_crun_settle) */
  finish_writes(c, w, a->n, w != inline_w);
  r->written = outer;
}

void ob_crun_complete(ob_crun *c, int nres) {
  ob_call *call = c->call;
  lua_State *co = c->co;
  ob_run_prefetch_users(c->run, call, 3);
  if (!call->has_output) { /* fire-and-forget, or a thought: nothing is written */
    ob_crun_settle(c, OB_CALL_DONE, NULL);
    return;
  }
  if (nres == 0)
    lua_pushnil(co);
  int idx = lua_gettop(co) - (nres ? nres - 1 : 0);
  ob_run *r = c->run;
  ob_buf why;
  ob_buf_init(&why);
  out_write *w = NULL;
  size_t n = 0;
  int msg_one = lua_istable(co, idx) && has_metatable(co, idx, r->e->message_mt_ref);
  int msg_list = 0;
  if (!msg_one && lua_istable(co, idx) && luaL_len(co, idx) > 0) {
    lua_geti(co, idx, 1);
    msg_list = lua_istable(co, -1) && has_metatable(co, -1, r->e->message_mt_ref);
    lua_pop(co, 1);
  }
  int is_branch = lua_istable(co, idx) && has_metatable(co, idx, r->e->branch_mt_ref);
  if (c->branched && !is_branch) { /* made, then dropped: it would write the first */
    ob_crun_fail(c, "runtime", "obelus.branch(...) was called but its value not returned: "
                               "return obelus.branch(...)");
    return;
  }
  if (msg_one || msg_list) {
    size_t total = msg_one ? 1 : (size_t)luaL_len(co, idx);
    w = calloc(total, sizeof *w);
    if (!w)
      abort();
    for (size_t i = 0; i < total; i++) {
      if (msg_one)
        lua_pushvalue(co, idx);
      else
        lua_geti(co, idx, (lua_Integer)i + 1);
      int ok = lua_istable(co, -1) && has_metatable(co, -1, r->e->message_mt_ref) &&
               read_message(c, co, -1, &w[n], &why);
      if (!ok && !why.len)
        ob_buf_addf(&why, "result[%zu] is not an obelus.message", i + 1);
      lua_pop(co, 1);
      if (!ok)
        break;
      n++;
    }
    if (n < total) {
      free_writes(w, n, 1);
      ob_crun_fail(c, "runtime", why.data);
      ob_buf_free(&why);
      return;
    }
    ob_buf_free(&why);
    finish_writes(c, w, n, 1);
    return;
  }
  long alt = 0;
  int value_idx = idx;
  if (is_branch) {
    alt = pick_branch(c, co, idx, &why);
    lua_getfield(co, idx, "value");
    value_idx = lua_gettop(co);
  }
  ob_error err;
  /* returning nothing writes null */
  ob_value *value = alt < 0                      ? NULL
                    : lua_isnil(co, value_idx) ? ob_null()
                                               : ob_lua_to_value_named(co, value_idx, "result", &err);
  if (alt >= 0 && !value)
    ob_buf_addf(&why, "%s", err.msg);
  if (!value) {
    ob_crun_fail(c, "runtime", why.data);
    ob_buf_free(&why);
    return;
  }
  ob_buf_free(&why);
  ob_crun_write_alt(c, (size_t)alt, value);
  ob_unref(value);
}

/* A Lua error in the tool: handled by the last || alternative when there are
 * two or more (plan-format §3), else a runtime error of the call (its traceback said as a
 * note "traceback" of the run). */
void ob_crun_tool_error(ob_crun *c, const char *msg, const char *traceback) {
  ob_call *call = c->call;
  if (!call->has_output || call->output.n < 2) {
    if (traceback)
      ob_run_emit_note(c->run, "traceback", call, "call %s (%s) raised an error:\n%s", call->id,
                       call->tool_name, traceback);
    ob_crun_fail(c, "runtime", msg);
    return;
  }
  ob_value *e = ob_object();
  e = ob_object_set(e, "error", 5, ob_cstring(msg));
  e = ob_object_set(e, "tool", 4, ob_cstring(call->tool_name));
  e = ob_object_set(e, "call", 4, ob_cstring(call->id));
  ob_run_emit_note(c->run, "error_routed", call, "call %s (%s): the error goes to %s: %s",
                   call->id, call->tool_name, call->output.alts[call->output.n - 1].text, msg);
  c->run->handled = 1; /* the done event says so */
  ob_crun_write_alt(c, call->output.n - 1, e);
  c->run->handled = 0;
  ob_unref(e);
}
