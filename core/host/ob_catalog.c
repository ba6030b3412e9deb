/* ob_catalog.c -- tools and plans described as JSON Schema for planners
 * (ob_catalog.h).
 *
 * A tool's own schema describes its params with the meta-properties included
 * (plan-format §9): for an LLM calling the tool, the meta-properties are taken out. For
 * a plan, they are put back with their rules, and every param may hold a
 * reference string instead of a value, at any depth: each subschema S of a
 * param becomes {"anyOf": [S', {"$ref": "#/definitions/reference"}]}, S' being S
 * with its properties, items and additionalProperties treated the same way. A
 * call's keys that begin with "_" must be known meta-properties (propertyNames),
 * as validation demands. Tools are named by their API names for the LLM APIs and
 * keyed by them in the plan schema, whose _tool takes either name (ob_toolname.h). */
#include <stdlib.h>
#include <string.h>

#include "host/ob_catalog.h"
#include "base/ob_mem.h"
#include "plan/ob_plan.h"
#include "plan/ob_toolname.h"

static const char *const METHODS[] = {"set", "merge", "assign", "push", "concat"};
static const char *const METAS[] = {"_tool",    "_outputPath", "_outputMethod",    "_instance",
                                    "_id",      "_timeout",    "_retry",           "_each",
                                    "_eachConcurrency",        "_delegate",        "_scopes"};
#define NMETAS (sizeof METAS / sizeof *METAS)

int ob_catalog_format_parse(const char *s, ob_catalog_format *out) {
  static const char *const names[] = {"json-schema", "openai", "anthropic", "mcp"};
  for (int i = 0; i < 4; i++)
    if (!strcmp(s, names[i])) {
      *out = (ob_catalog_format)i;
      return OB_OK;
    }
  return OB_EINVAL;
}

/* A shallow copy of object o without the keys that keep() refuses. */
static ob_value *copy_object(const ob_value *o, int (*keep)(const char *key)) {
  ob_value *c = ob_object();
  ob_object_iter it;
  ob_value *k, *v;
  ob_object_iter_init(&it, o);
  while (ob_object_iter_next(&it, &k, &v))
    if (!keep || keep(ob_string_ptr(k)))
      c = ob_object_setv(c, k, ob_ref(v));
  return c;
}

static int not_meta(const char *key) { return key[0] != '_'; }

ob_value *ob_catalog_params(const ob_tool *t) {
  const ob_value *s = t->schema_value;
  if (!s || ob_typeof(s) != OB_OBJECT)
    return ob_object_set(ob_object(), "type", 4, ob_cstring("object"));
  ob_value *c = copy_object(s, NULL);
  const ob_value *props = ob_object_get(s, "properties", 10);
  if (props && ob_typeof(props) == OB_OBJECT)
    c = ob_object_set(c, "properties", 10, copy_object(props, not_meta));
  const ob_value *req = ob_object_get(s, "required", 8);
  if (req && ob_typeof(req) == OB_ARRAY) {
    ob_value *r = ob_array();
    for (size_t i = 0; i < ob_array_len(req); i++) {
      const ob_value *name = ob_array_get(req, i);
      if (ob_typeof(name) == OB_STRING && not_meta(ob_string_ptr(name)))
        r = ob_array_push(r, ob_ref((ob_value *)name));
    }
    c = ob_object_set(c, "required", 8, r);
  }
  if (!ob_object_get(c, "type", 4))
    c = ob_object_set(c, "type", 4, ob_cstring("object"));
  return c;
}

static int by_name(const void *a, const void *b) {
  return strcmp((*(const ob_tool *const *)a)->name, (*(const ob_tool *const *)b)->name);
}

/* The engine's tools sorted by name (malloc'ed array of n). */
static const ob_tool **sorted_tools(const ob_engine *e, size_t *n) {
  const ob_tool **ts = ob_xmalloc((e->tools.n + 1) * sizeof *ts);
  *n = 0;
  ob_map_entry *me;
  for (size_t i = 0; ob_map_next(&e->tools, &i, &me);)
    ts[(*n)++] = me->val;
  qsort(ts, *n, sizeof *ts, by_name);
  return ts;
}

ob_value *ob_catalog_tools(const ob_engine *e, ob_catalog_format format) {
  size_t n;
  const ob_tool **ts = sorted_tools(e, &n);
  ob_toolnames names;
  ob_toolnames_init(&names, &e->tools);
  ob_value *list = ob_array();
  for (size_t i = 0; i < n; i++) {
    const ob_tool *t = ts[i];
    const char *api = ob_toolnames_api(&names, t->name);
    /* the LLM APIs take API names; MCP and json-schema the real one (MCP allows it) */
    int llm = format == OB_CATALOG_OPENAI || format == OB_CATALOG_ANTHROPIC;
    ob_value *name = ob_cstring(llm ? api : t->name);
    ob_value *desc = ob_cstring(t->description ? t->description : "");
    ob_value *params = ob_catalog_params(t);
    ob_value *o = ob_object();
    switch (format) {
    case OB_CATALOG_OPENAI: {
      ob_value *fn = ob_object();
      fn = ob_object_set(fn, "name", 4, name);
      fn = ob_object_set(fn, "description", 11, desc);
      fn = ob_object_set(fn, "parameters", 10, params);
      o = ob_object_set(o, "type", 4, ob_cstring("function"));
      o = ob_object_set(o, "function", 8, fn);
      break;
    }
    case OB_CATALOG_ANTHROPIC:
      o = ob_object_set(o, "name", 4, name);
      o = ob_object_set(o, "description", 11, desc);
      o = ob_object_set(o, "input_schema", 12, params);
      break;
    case OB_CATALOG_MCP:
      o = ob_object_set(o, "name", 4, name);
      o = ob_object_set(o, "description", 11, desc);
      o = ob_object_set(o, "inputSchema", 11, params);
      if (t->latent)
        o = ob_object_set(o, "_meta", 5,
                          ob_object_set(ob_object(), "obelus/latent", 13, ob_true()));
      break;
    case OB_CATALOG_JSON_SCHEMA:
      o = ob_object_set(o, "name", 4, name);
      if (strcmp(api, t->name))
        o = ob_object_set(o, "api_name", 8, ob_cstring(api));
      o = ob_object_set(o, "description", 11, desc);
      o = ob_object_set(o, "parameters", 10, params);
      if (t->latent)
        o = ob_object_set(o, "latent", 6, ob_true());
      break;
    }
    list = ob_array_push(list, o);
  }
  ob_toolnames_free(&names);
  free(ts);
  if (format == OB_CATALOG_MCP)
    return ob_object_set(ob_object(), "tools", 5, list);
  return list;
}

/* --- the plan schema ---------------------------------------------------------------------- */

static ob_value *ref_to(const char *def) {
  char buf[96];
  snprintf(buf, sizeof buf, "#/definitions/%s", def);
  return ob_object_set(ob_object(), "$ref", 4, ob_cstring(buf));
}

static ob_value *strings(const char *const *xs, size_t n) {
  ob_value *a = ob_array();
  for (size_t i = 0; i < n; i++)
    a = ob_array_push(a, ob_cstring(xs[i]));
  return a;
}

/* s, where any value may instead be a reference string, at any depth. */
static ob_value *refable(const ob_value *s) {
  if (!s || ob_typeof(s) != OB_OBJECT)
    return s ? ob_ref((ob_value *)s) : ob_true();
  ob_value *c = copy_object(s, NULL);
  const ob_value *props = ob_object_get(s, "properties", 10);
  if (props && ob_typeof(props) == OB_OBJECT) {
    ob_value *p = ob_object();
    ob_object_iter it;
    ob_value *k, *v;
    ob_object_iter_init(&it, props);
    while (ob_object_iter_next(&it, &k, &v))
      p = ob_object_setv(p, k, refable(v));
    c = ob_object_set(c, "properties", 10, p);
  }
  const ob_value *items = ob_object_get(s, "items", 5);
  if (items && ob_typeof(items) == OB_OBJECT) {
    c = ob_object_set(c, "items", 5, refable(items));
  } else if (items && ob_typeof(items) == OB_ARRAY) {
    ob_value *a = ob_array();
    for (size_t i = 0; i < ob_array_len(items); i++)
      a = ob_array_push(a, refable(ob_array_get(items, i)));
    c = ob_object_set(c, "items", 5, a);
  }
  const ob_value *addl = ob_object_get(s, "additionalProperties", 20);
  if (addl && ob_typeof(addl) == OB_OBJECT)
    c = ob_object_set(c, "additionalProperties", 20, refable(addl));
  ob_value *any = ob_array_push(ob_array_push(ob_array(), c), ref_to("reference"));
  return ob_object_set(ob_object(), "anyOf", 5, any);
}

/* The meta-properties every call may carry, with their rules. */
static ob_value *meta_properties(void) {
  ob_value *p = ob_object();
  p = ob_object_set(p, "_id", 3,
                    ob_object_set(ob_object_set(ob_object(), "type", 4, ob_cstring("string")),
                                  "pattern", 7, ob_cstring("^[^@]*$")));
  p = ob_object_set(p, "_outputPath", 11, ref_to("outputPath"));
  p = ob_object_set(p, "_outputMethod", 13,
                    ob_object_set(ob_object(), "enum", 4, strings(METHODS, 5)));
  p = ob_object_set(p, "_instance", 9, ob_object_set(ob_object(), "type", 4, ob_cstring("string")));
  p = ob_object_set(p, "_timeout", 8,
                    ob_object_set(ob_object_set(ob_object(), "type", 4, ob_cstring("integer")),
                                  "minimum", 7, ob_int(1)));
  p = ob_object_set(p, "_retry", 6, ref_to("retry"));
  p = ob_object_set(p, "_each", 5,
                    ob_object_set(ref_to("reference"), "description", 11,
                                  ob_cstring("a list read at run time: the call runs once per "
                                             "element, â each.value (and paths below it) "
                                             "and â each.index in its params")));
  p = ob_object_set(p, "_eachConcurrency", 16,
                    ob_object_set(ob_object_set(ob_object(), "type", 4, ob_cstring("integer")),
                                  "minimum", 7, ob_int(1)));
  return p;
}

/* Keys that begin with "_" must be known meta-properties. */
static ob_value *known_metas(const char *const *allowed, size_t n) {
  ob_value *any = ob_array();
  any = ob_array_push(any, ob_object_set(ob_object(), "not", 3,
                                         ob_object_set(ob_object(), "pattern", 7, ob_cstring("^_"))));
  any = ob_array_push(any, ob_object_set(ob_object(), "enum", 4, strings(allowed, n)));
  return ob_object_set(ob_object(), "anyOf", 5, any);
}

/* _tool: the API name, or the real one, which the loader takes too (ob_toolname.h). */
static ob_value *tool_names(const ob_tool *t, const char *api) {
  if (!strcmp(api, t->name))
    return ob_object_set(ob_object(), "const", 5, ob_cstring(t->name));
  ob_value *both = ob_array_push(ob_array_push(ob_array(), ob_cstring(api)), ob_cstring(t->name));
  return ob_object_set(ob_object(), "enum", 4, both);
}

static ob_value *tool_call(const ob_tool *t, const char *api) {
  const ob_value *s = t->schema_value && ob_typeof(t->schema_value) == OB_OBJECT ? t->schema_value
                                                                                : NULL;
  ob_value *props = meta_properties();
  props = ob_object_set(props, "_tool", 5, tool_names(t, api));
  const ob_value *tp = s ? ob_object_get(s, "properties", 10) : NULL;
  ob_object_iter it;
  ob_value *k, *v;
  if (tp && ob_typeof(tp) == OB_OBJECT) {
    ob_object_iter_init(&it, tp);
    while (ob_object_iter_next(&it, &k, &v)) {
      const char *key = ob_string_ptr(k);
      if (key[0] == '_') { /* a rule of the tool's on a meta-property: both apply */
        const ob_value *base = ob_object_get(props, key, ob_string_len(k));
        ob_value *all = ob_array_push(ob_array(), base ? ob_ref((ob_value *)base) : ob_true());
        all = ob_array_push(all, ob_ref(v));
        props = ob_object_setv(props, k, ob_object_set(ob_object(), "allOf", 5, all));
      } else {
        props = ob_object_setv(props, k, refable(v));
      }
    }
  }
  ob_value *req = ob_array_push(ob_array(), ob_cstring("_tool"));
  const ob_value *tr = s ? ob_object_get(s, "required", 8) : NULL;
  for (size_t i = 0; tr && ob_typeof(tr) == OB_ARRAY && i < ob_array_len(tr); i++)
    req = ob_array_push(req, ob_ref(ob_array_get(tr, i)));
  ob_value *c = ob_object_set(ob_object(), "type", 4, ob_cstring("object"));
  if (t->description && *t->description)
    c = ob_object_set(c, "description", 11, ob_cstring(t->description));
  c = ob_object_set(c, "properties", 10, props);
  c = ob_object_set(c, "required", 8, req);
  /* _delegate and _scopes belong to delegate calls */
  c = ob_object_set(c, "propertyNames", 13, known_metas(METAS, NMETAS - 2));
  const ob_value *addl = s ? ob_object_get(s, "additionalProperties", 20) : NULL;
  if (addl)
    c = ob_object_set(c, "additionalProperties", 20, refable(addl));
  return c;
}

static ob_value *delegate_call(void) {
  ob_value *props = meta_properties();
  props = ob_object_set(props, "_tool", 5, ob_object_set(ob_object(), "type", 4, ob_cstring("string")));
  props = ob_object_set(props, "_delegate", 9,
                        ob_object_set(ob_object(), "type", 4, ob_cstring("string")));
  props = ob_object_set(
      props, "_scopes", 7,
      ob_object_set(ob_object_set(ob_object(), "type", 4, ob_cstring("array")), "items", 5,
                    ob_object_set(ob_object(), "type", 4, ob_cstring("string"))));
  ob_value *c = ob_object_set(ob_object(), "type", 4, ob_cstring("object"));
  c = ob_object_set(c, "description", 11,
                    ob_cstring("runs the plan file _delegate names; its other params are its input"));
  c = ob_object_set(c, "properties", 10, props);
  c = ob_object_set(c, "required", 8, ob_array_push(ob_array(), ob_cstring("_delegate")));
  c = ob_object_set(c, "propertyNames", 13, known_metas(METAS, NMETAS));
  return c;
}

static ob_value *typed(const char *type) {
  return ob_object_set(ob_object(), "type", 4, ob_cstring(type));
}

static ob_value *retry_schema(void) {
  ob_value *count = ob_object_set(typed("integer"), "minimum", 7, ob_int(1));
  ob_value *p = ob_object();
  p = ob_object_set(p, "attempts", 8, ob_object_set(typed("integer"), "minimum", 7, ob_int(1)));
  p = ob_object_set(p, "delay_ms", 8, ob_object_set(typed("integer"), "minimum", 7, ob_int(0)));
  p = ob_object_set(p, "backoff", 7, ob_object_set(typed("number"), "minimum", 7, ob_int(1)));
  p = ob_object_set(p, "max_delay_ms", 12, ob_object_set(typed("integer"), "minimum", 7, ob_int(0)));
  p = ob_object_set(p, "jitter", 6, typed("boolean"));
  ob_value *o = ob_object_set(typed("object"), "properties", 10, p);
  o = ob_object_set(o, "required", 8, ob_array_push(ob_array(), ob_cstring("attempts")));
  o = ob_object_set(o, "additionalProperties", 20, ob_false());
  return ob_object_set(ob_object(), "anyOf", 5, ob_array_push(ob_array_push(ob_array(), count), o));
}

ob_value *ob_catalog_plan_schema(const ob_engine *e) {
  size_t n;
  const ob_tool **ts = sorted_tools(e, &n);
  ob_toolnames names;
  ob_toolnames_init(&names, &e->tools);
  ob_value *defs = ob_object();
  ob_value *calls = ob_array();
  for (size_t i = 0; i < n; i++) {
    /* keyed by the API name: a real one could hold '/', '~' or a space, which a
     * $ref's pointer would have to escape */
    const char *api = ob_toolnames_api(&names, ts[i]->name);
    char key[96];
    snprintf(key, sizeof key, "tool:%s", api);
    defs = ob_object_set(defs, key, strlen(key), tool_call(ts[i], api));
    calls = ob_array_push(calls, ref_to(key));
  }
  ob_toolnames_free(&names);
  free(ts);
  defs = ob_object_set(defs, "delegate", 8, delegate_call());
  calls = ob_array_push(calls, ref_to("delegate"));
  defs = ob_object_set(defs, "call", 4, ob_object_set(ob_object(), "anyOf", 5, calls));
  defs = ob_object_set(defs, "reference", 9,
                       ob_object_set(ob_object_set(typed("string"), "pattern", 7, ob_cstring("^\xE2\x80\xA0")),
                                     "description", 11,
                                     ob_cstring("a reference expression (plan-format §2-3): \xE2\x80\xA0kind.path, "
                                                "alternatives with ||, all of them with &&")));
  defs = ob_object_set(defs, "outputPath", 10,
                       ob_object_set(ob_object_set(typed("string"), "pattern", 7, ob_cstring("^\xE2\x80\xA0")),
                                     "description", 11,
                                     ob_cstring("where the result goes: \xE2\x80\xA0kind.path, or "
                                                "alternatives with || for obelus.branch")));
  defs = ob_object_set(defs, "retry", 5, retry_schema());
  defs = ob_object_set(defs, "message", 7,
                       ob_object_set(ob_object_set(typed("object"), "required", 8,
                                                   ob_array_push(ob_array(), ob_cstring("type"))),
                                     "properties", 10,
                                     ob_object_set(ob_object(), "type", 4, typed("string"))));
  ob_value *plan_array = ob_object_set(typed("array"), "items", 5, ref_to("call"));
  ob_value *inst = ob_object_set(
      ob_object(), "anyOf", 5,
      ob_array_push(ob_array_push(ob_array(), ob_object_set(typed("array"), "items", 5, typed("string"))),
                    ob_object_set(ob_object(), "const", 5, ob_cstring("auto"))));
  ob_value *op = ob_object();
  op = ob_object_set(op, "context", 7, ob_object_set(typed("array"), "items", 5, ref_to("message")));
  op = ob_object_set(op, "plan", 4, ob_ref(plan_array));
  op = ob_object_set(op, "output", 6, ob_true());
  op = ob_object_set(op, "instances", 9, inst);
  ob_value *obj = ob_object_set(typed("object"), "properties", 10, op);
  obj = ob_object_set(obj, "required", 8, ob_array_push(ob_array(), ob_cstring("plan")));
  obj = ob_object_set(obj, "additionalProperties", 20, ob_false());
  ob_value *s = ob_object();
  s = ob_object_set(s, "$schema", 7, ob_cstring("http://json-schema.org/draft-07/schema#"));
  s = ob_object_set(s, "title", 5, ob_cstring("an obelus plan for these tools"));
  s = ob_object_set(s, "anyOf", 5, ob_array_push(ob_array_push(ob_array(), plan_array), obj));
  s = ob_object_set(s, "definitions", 11, defs);
  return s;
}
