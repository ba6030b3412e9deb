/* ob_catalog_strict.c -- a plan's JSON Schema for OpenAI's strict structured output
 * (ob_catalog.h: ob_catalog_plan_schema_strict; `obelus tools --plan-schema --strict`).
 *
 * The rules strict mode sets (OpenAI's "Supported schemas" of Structured Outputs):
 * the root is an object, not anyOf; every object has "additionalProperties": false and
 * lists all its properties in "required", an optional one being nullable ("type":
 * [T, "null"], or anyOf with {"type": "null"}); the keywords are type, properties,
 * required, additionalProperties, items, enum, const, anyOf, $ref, $defs and
 * description, with pattern and format for strings, minimum, maximum,
 * exclusiveMinimum, exclusiveMaximum and multipleOf for numbers, minItems and maxItems
 * for arrays; never allOf, not, oneOf, if/then/else, dependentRequired,
 * dependentSchemas, patternProperties, propertyNames. Its limits: 5,000 object
 * properties in all, 10 levels of nested objects, 1,000 enum values, 120,000
 * characters of property names, definition names, enum and const values together, and
 * a string enum of more than 250 values at most 15,000 characters.
 *
 * The plan is its object form, {"plan": [calls], "output", "instances"} (the loader's
 * own; its array form would be a root that is not an object). "output" is one string
 * (a reference, or text) or null (then the state is the output): a template of any
 * JSON is what strict mode cannot say. "instances" is a list of ids or null.
 * "context" is left out (messages hold any JSON): inputs come with --input.
 * A call is one of: an object per tool, "_tool" its API name (ob_toolname.h), its
 * params as the tool's schema says (converted, below), each of them, at any depth,
 * either that or a reference string ("†..."), and every meta-property, each nullable
 * unless the tool's schema requires it; or a delegate call, whose params (the
 * delegated plan's input) strict mode cannot say: it has none. The plan loader reads
 * each null as absent (ob_nulls.h), so a plan a model writes to this schema, nulls and
 * all, runs as the same plan without them.
 *
 * Converting a tool's schema: what strict mode has is kept; what it lacks is left out
 * with a note (the plan loader still judges it: the strict schema may take a plan the
 * tool then refuses, never refuse one it takes for what it keeps): an unknown keyword
 * (minLength, uniqueItems, not, if ...); oneOf (taken as anyOf); allOf (beside a type:
 * left out; alone: its first schema); an object without properties (a map: only {}
 * can be said); any value (true, {}): a scalar or null; a format strict mode does not
 * know; an object nested past the 10 levels (a scalar). Local $refs are inlined; a
 * schema that nests past MAX_STEPS conversions (a recursive $ref) becomes a scalar.
 * The whole is then measured against the limits, each one passed making a note.
 *
 * Costs: a walk of each tool's schema and one of the result (its $defs followed for
 * the depth); nothing is kept. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/ob_catalog.h"
#include "base/ob_buf.h"
#include "base/ob_doc.h"
#include "base/ob_mem.h"
#include "plan/ob_plan.h"
#include "plan/ob_toolname.h"

#define MAX_LEVELS 10         /* nested objects */
#define MAX_PROPERTIES 5000   /* object properties in all */
#define MAX_ENUM_VALUES 1000  /* enum values in all */
#define MAX_CHARS 120000      /* property and definition names, enum and const values */
#define BIG_ENUM 250          /* a string enum of more values ... */
#define BIG_ENUM_CHARS 15000  /* ... has at most these characters */
#define MAX_STEPS 32          /* conversions nested in one param (a recursive $ref) */

/* What strict mode takes beside type (ob_catalog_strict.c's header). */
static const char *const KEPT[] = {"type",     "properties", "required",  "additionalProperties",
                                   "items",    "enum",       "const",     "anyOf",
                                   "$ref",     "description", "pattern",  "format",
                                   "minimum",  "maximum",    "exclusiveMinimum",
                                   "exclusiveMaximum",       "multipleOf", "minItems",
                                   "maxItems", "oneOf",      "allOf"};
/* Annotations and containers that say nothing of a value: left out without a note. */
static const char *const SILENT[] = {"title",    "default",    "examples",   "$comment", "$id",
                                     "$schema",  "definitions", "$defs",     "readOnly",
                                     "writeOnly", "deprecated", "contentMediaType",
                                     "contentEncoding"};
static const char *const FORMATS[] = {"date-time", "time",  "date", "duration", "email",
                                      "hostname",  "ipv4",  "ipv6", "uuid"};

static int one_of(const char *s, const char *const *xs, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(s, xs[i]))
      return 1;
  return 0;
}
#define ONE_OF(s, xs) one_of(s, xs, sizeof xs / sizeof *xs)

static const ob_value *get(const ob_value *o, const char *key) {
  return o && ob_typeof(o) == OB_OBJECT ? ob_object_get(o, key, strlen(key)) : NULL;
}

static ob_value *typed(const char *t) { return ob_object_set(ob_object(), "type", 4, ob_cstring(t)); }

static ob_value *def(const char *name) {
  char buf[96];
  snprintf(buf, sizeof buf, "#/$defs/%s", name);
  return ob_object_set(ob_object(), "$ref", 4, ob_cstring(buf));
}

static ob_value *set(ob_value *o, const char *key, ob_value *v) {
  return ob_object_set(o, key, strlen(key), v);
}

static ob_value *copy_of(const ob_value *v) { return ob_ref((ob_value *)v); }

/* --- a tool's schema converted -------------------------------------------------------- */

typedef struct conv {
  const ob_value *root; /* the tool's schema (its $refs lead into it) */
  const char *tool;     /* its real name, for notes */
  ob_value **notes;
  ob_buf where;         /* the param being converted: "/city", "/opts/lang" */
  int steps;
} conv;

static void note(conv *c, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
static void note(conv *c, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addf(&b, "tool \"%s\": %s: %s", c->tool, c->where.len ? c->where.data : "(params)", msg);
  *c->notes = ob_array_push(*c->notes, ob_string(b.data, b.len));
  ob_buf_free(&b);
}

/* Any value strict mode can say: a scalar, or null. */
static ob_value *any_value(void) {
  ob_value *t = ob_array();
  t = ob_array_push(t, ob_cstring("string"));
  t = ob_array_push(t, ob_cstring("number"));
  t = ob_array_push(t, ob_cstring("boolean"));
  t = ob_array_push(t, ob_cstring("null"));
  return ob_object_set(ob_object(), "type", 4, t);
}

/* s or b (consumes both): anyOf, flattened; s's description goes on the anyOf. */
static ob_value *either(ob_value *s, ob_value *b) {
  const ob_value *any = get(s, "anyOf");
  if (any && ob_object_len(s) <= 2 && (ob_object_len(s) == 1 || get(s, "description")))
    return set(s, "anyOf", ob_array_push(ob_ref((ob_value *)any), b));
  ob_value *desc = ob_ref((ob_value *)get(s, "description"));
  if (desc) { /* s without its description */
    ob_value *bare = ob_object(), *k, *v;
    ob_object_iter it;
    ob_object_iter_init(&it, s);
    while (ob_object_iter_next(&it, &k, &v))
      if (strcmp(ob_string_ptr(k), "description"))
        bare = ob_object_setv(bare, k, ob_ref(v));
    ob_unref(s);
    s = bare;
  }
  ob_value *o = ob_object();
  if (desc)
    o = set(o, "description", desc);
  return set(o, "anyOf", ob_array_push(ob_array_push(ob_array(), s), b));
}

static int is_null_schema(const ob_value *s) {
  const ob_value *t = get(s, "type");
  return ob_object_len(s) == 1 && t && ob_typeof(t) == OB_STRING && !strcmp(ob_string_ptr(t), "null");
}

/* s, also taking null (consumes s). */
static ob_value *nullable(ob_value *s) {
  const ob_value *t = get(s, "type"), *any = get(s, "anyOf");
  if (any) {
    for (size_t i = 0; i < ob_array_len(any); i++)
      if (is_null_schema(ob_array_get(any, i)))
        return s;
    return either(s, typed("null"));
  }
  if (get(s, "enum") || get(s, "const") || get(s, "$ref") || !t)
    return either(s, typed("null"));
  if (ob_typeof(t) == OB_STRING) {
    const char *ts = ob_string_ptr(t);
    if (!strcmp(ts, "null"))
      return s;
    if (!strcmp(ts, "object") || !strcmp(ts, "array")) /* a container: anyOf, as OpenAI's own */
      return either(s, typed("null"));
    ob_value *both = ob_array_push(ob_array_push(ob_array(), ob_ref((ob_value *)t)), ob_cstring("null"));
    return set(s, "type", both);
  }
  for (size_t i = 0; i < ob_array_len(t); i++)
    if (!strcmp(ob_string_ptr(ob_array_get(t, i)), "null"))
      return s;
  return set(s, "type", ob_array_push(ob_ref((ob_value *)t), ob_cstring("null")));
}

static int listed(const ob_value *req, const char *key) {
  for (size_t i = 0; req && ob_typeof(req) == OB_ARRAY && i < ob_array_len(req); i++) {
    const ob_value *r = ob_array_get(req, i);
    if (ob_typeof(r) == OB_STRING && !strcmp(ob_string_ptr(r), key))
      return 1;
  }
  return 0;
}

static ob_value *convert(conv *c, const ob_value *s, int refs, int level);

/* An enum (or const, one value) of scalars; null among them makes it nullable. */
static ob_value *enum_of(conv *c, const ob_value *values) {
  ob_value *vals = ob_array(), *types = ob_array();
  int has_null = 0, dropped = 0;
  for (size_t i = 0; i < ob_array_len(values); i++) {
    const ob_value *v = ob_array_get(values, i);
    const char *t;
    switch (ob_typeof(v)) {
    case OB_NULL: has_null = 1; continue;
    case OB_STRING: t = "string"; break;
    case OB_INT: t = "integer"; break;
    case OB_REAL: t = "number"; break;
    case OB_TRUE:
    case OB_FALSE: t = "boolean"; break;
    default: dropped = 1; continue;
    }
    vals = ob_array_push(vals, ob_ref((ob_value *)v));
    int seen = 0;
    for (size_t k = 0; k < ob_array_len(types); k++)
      seen |= !strcmp(ob_string_ptr(ob_array_get(types, k)), t);
    if (!seen)
      types = ob_array_push(types, ob_cstring(t));
  }
  if (dropped)
    note(c, "an enum's objects and arrays are left out (strict mode lists scalars)");
  ob_value *s;
  if (!ob_array_len(vals)) {
    ob_unref(vals);
    ob_unref(types);
    return has_null ? typed("null") : any_value();
  }
  if (ob_array_len(types) == 1) {
    s = ob_object_set(ob_object(), "type", 4, ob_ref(ob_array_get(types, 0)));
    ob_unref(types);
  } else {
    s = ob_object_set(ob_object(), "type", 4, types);
  }
  s = set(s, "enum", vals);
  return has_null ? either(s, typed("null")) : s;
}

static void keep_numbers(ob_value **o, const ob_value *s, const char *const *keys, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const ob_value *v = get(s, keys[i]);
    if (v && ob_is_number(v))
      *o = set(*o, keys[i], copy_of(v));
  }
}

/* The schema of one type T of s. */
static ob_value *of_type(conv *c, const ob_value *s, const char *t, int refs, int level) {
  ob_value *o = typed(t);
  if (!strcmp(t, "string")) {
    const ob_value *pat = get(s, "pattern"), *fmt = get(s, "format");
    if (pat && ob_typeof(pat) == OB_STRING)
      o = set(o, "pattern", copy_of(pat));
    if (fmt && ob_typeof(fmt) == OB_STRING) {
      if (ONE_OF(ob_string_ptr(fmt), FORMATS))
        o = set(o, "format", copy_of(fmt));
      else
        note(c, "format \"%s\" is left out (strict mode knows date-time, time, date, "
                "duration, email, hostname, ipv4, ipv6, uuid)", ob_string_ptr(fmt));
    }
  } else if (!strcmp(t, "integer") || !strcmp(t, "number")) {
    static const char *const nums[] = {"minimum", "maximum", "exclusiveMinimum",
                                       "exclusiveMaximum", "multipleOf"};
    keep_numbers(&o, s, nums, 5);
  } else if (!strcmp(t, "array")) {
    const ob_value *items = get(s, "items");
    ob_value *is;
    size_t mark = c->where.len;
    ob_buf_add(&c->where, "[]", 2);
    if (items && ob_typeof(items) == OB_ARRAY) {
      note(c, "items as a list (a tuple) is taken as any of its schemas");
      ob_value *any = ob_array();
      for (size_t i = 0; i < ob_array_len(items); i++) {
        ob_value *x = convert(c, ob_array_get(items, i), refs, level);
        if (x)
          any = ob_array_push(any, x);
      }
      is = ob_array_len(any) ? ob_object_set(ob_object(), "anyOf", 5, any) : (ob_unref(any), any_value());
    } else {
      is = items ? convert(c, items, refs, level) : NULL;
      if (!is)
        is = refs ? either(any_value(), def("reference")) : any_value();
    }
    c->where.len = mark;
    c->where.data[mark] = '\0';
    o = set(o, "items", is);
    static const char *const counts[] = {"minItems", "maxItems"};
    keep_numbers(&o, s, counts, 2);
  } else if (!strcmp(t, "object")) {
    if (level + 1 > MAX_LEVELS) {
      note(c, "an object nested past %d levels is taken as a scalar", MAX_LEVELS);
      ob_unref(o);
      return any_value();
    }
    const ob_value *props = get(s, "properties"), *req = get(s, "required");
    ob_value *p = ob_object(), *names = ob_array(), *k, *v;
    if (props && ob_typeof(props) == OB_OBJECT) {
      ob_object_iter it;
      ob_object_iter_init(&it, props);
      while (ob_object_iter_next(&it, &k, &v)) {
        size_t mark = c->where.len;
        ob_buf_addc(&c->where, '/');
        ob_buf_add(&c->where, ob_string_ptr(k), ob_string_len(k));
        ob_value *x = convert(c, v, refs, level + 1);
        if (!x)
          note(c, "a property no value may have (false) is left out");
        c->where.len = mark;
        c->where.data[mark] = '\0';
        if (!x)
          continue;
        if (!listed(req, ob_string_ptr(k)))
          x = nullable(x);
        p = ob_object_setv(p, k, x);
        names = ob_array_push(names, ob_ref(k));
      }
    }
    const ob_value *addl = get(s, "additionalProperties");
    if (!ob_object_len(p) && !(addl && ob_typeof(addl) == OB_FALSE))
      note(c, "an object without properties (a map) can only be {} in strict mode");
    o = set(o, "properties", p);
    o = set(o, "required", names);
    o = set(o, "additionalProperties", ob_false());
  } else if (strcmp(t, "boolean") && strcmp(t, "null")) {
    ob_unref(o);
    return NULL;
  }
  return o;
}

/* The same schema of several types: "type": [...] when they say nothing else. */
static ob_value *merged(ob_value *branches) {
  size_t n = ob_array_len(branches);
  if (n == 1) {
    ob_value *one = ob_ref(ob_array_get(branches, 0));
    ob_unref(branches);
    return one;
  }
  int plain = 1;
  for (size_t i = 0; i < n; i++)
    plain &= ob_object_len(ob_array_get(branches, i)) == 1;
  if (!plain)
    return ob_object_set(ob_object(), "anyOf", 5, branches);
  ob_value *types = ob_array();
  for (size_t i = 0; i < n; i++)
    types = ob_array_push(types, ob_ref((ob_value *)get(ob_array_get(branches, i), "type")));
  ob_unref(branches);
  return ob_object_set(ob_object(), "type", 4, types);
}

/* s without a reference alternative: NULL for false (no value may be there). */
static ob_value *convert_bare(conv *c, const ob_value *s, int refs, int level) {
  if (ob_typeof(s) == OB_FALSE)
    return NULL;
  if (ob_typeof(s) != OB_OBJECT)
    return any_value();
  for (int hops = 0; get(s, "$ref"); hops++) {
    const ob_value *r = get(s, "$ref");
    const ob_value *to = hops < 16 && ob_typeof(r) == OB_STRING
                             ? ob_schema_ref_target(c->root, ob_string_ptr(r)) : NULL;
    if (!to) {
      note(c, "a $ref that leads out of the tool's schema is taken as any value");
      return any_value();
    }
    s = to;
    if (ob_typeof(s) != OB_OBJECT)
      return ob_typeof(s) == OB_FALSE ? NULL : any_value();
  }
  ob_object_iter it;
  ob_value *k, *v;
  ob_object_iter_init(&it, s);
  while (ob_object_iter_next(&it, &k, &v)) {
    const char *key = ob_string_ptr(k);
    if (!ONE_OF(key, KEPT) && !ONE_OF(key, SILENT) && strncmp(key, "x-", 2))
      note(c, "%s is left out (strict mode has no such keyword)", key);
  }
  const ob_value *type = get(s, "type"), *en = get(s, "enum"), *cn = get(s, "const");
  const ob_value *any = get(s, "anyOf"), *one = get(s, "oneOf"), *all = get(s, "allOf");
  const ob_value *desc = get(s, "description");
  ob_value *out = NULL;
  if (en && ob_typeof(en) == OB_ARRAY) {
    out = enum_of(c, en);
  } else if (cn) {
    ob_value *single = ob_array_push(ob_array(), ob_ref((ob_value *)cn));
    out = enum_of(c, single);
    ob_unref(single);
  } else if (!type && (any || one) && ob_typeof(any ? any : one) == OB_ARRAY) {
    const ob_value *list = any ? any : one;
    if (!any)
      note(c, "oneOf is taken as anyOf");
    ob_value *branches = ob_array();
    for (size_t i = 0; i < ob_array_len(list); i++) {
      ob_value *x = convert_bare(c, ob_array_get(list, i), refs, level);
      if (x)
        branches = ob_array_push(branches, x);
    }
    if (!ob_array_len(branches)) {
      ob_unref(branches);
      out = any_value();
    } else {
      out = merged(branches);
    }
  } else if (!type && all && ob_typeof(all) == OB_ARRAY && ob_array_len(all)) {
    if (ob_array_len(all) > 1)
      note(c, "allOf is taken as its first schema");
    out = convert_bare(c, ob_array_get(all, 0), refs, level);
    if (!out)
      return NULL;
  } else {
    ob_value *types = ob_array();
    if (type && ob_typeof(type) == OB_STRING)
      types = ob_array_push(types, ob_ref((ob_value *)type));
    else if (type && ob_typeof(type) == OB_ARRAY)
      for (size_t i = 0; i < ob_array_len(type); i++)
        types = ob_array_push(types, ob_ref(ob_array_get(type, i)));
    else if (get(s, "properties") || get(s, "required") || get(s, "additionalProperties"))
      types = ob_array_push(types, ob_cstring("object"));
    else if (get(s, "items"))
      types = ob_array_push(types, ob_cstring("array"));
    if (type && (any || one || all))
      note(c, "%s beside a type is left out", any ? "anyOf" : one ? "oneOf" : "allOf");
    ob_value *branches = ob_array();
    for (size_t i = 0; i < ob_array_len(types); i++) {
      const ob_value *t = ob_array_get(types, i);
      ob_value *x = ob_typeof(t) == OB_STRING ? of_type(c, s, ob_string_ptr(t), refs, level) : NULL;
      if (x)
        branches = ob_array_push(branches, x);
    }
    ob_unref(types);
    if (!ob_array_len(branches)) {
      ob_unref(branches);
      out = any_value();
    } else {
      out = merged(branches);
    }
  }
  if (desc && ob_typeof(desc) == OB_STRING)
    out = set(out, "description", copy_of(desc));
  return out;
}

/* s converted at object level `level`; with refs, a reference string may stand for it
 * (and for every value inside it). NULL: no value may be there. */
static ob_value *convert(conv *c, const ob_value *s, int refs, int level) {
  if (++c->steps > MAX_STEPS) {
    if (c->steps == MAX_STEPS + 1)
      note(c, "nested past %d schemas (a recursive $ref?): taken as a scalar", MAX_STEPS);
    c->steps--;
    return refs ? either(any_value(), def("reference")) : any_value();
  }
  ob_value *x = convert_bare(c, s, refs, level);
  c->steps--;
  return x && refs ? either(x, def("reference")) : x;
}

/* --- calls ------------------------------------------------------------------------------ */

static const char *const METAS[] = {"_id", "_outputPath", "_outputMethod", "_instance",
                                    "_timeout", "_retry", "_each", "_eachConcurrency"};
#define NMETAS (sizeof METAS / sizeof *METAS)

/* A meta-property's own rule (without null). */
static ob_value *meta_rule(const char *m) {
  if (!strcmp(m, "_id"))
    return set(typed("string"), "pattern", ob_cstring("^[^@]*$"));
  if (!strcmp(m, "_outputPath"))
    return def("outputPath");
  if (!strcmp(m, "_outputMethod"))
    return def("outputMethod");
  if (!strcmp(m, "_instance"))
    return typed("string");
  if (!strcmp(m, "_retry"))
    return def("retry");
  if (!strcmp(m, "_each"))
    return def("reference");
  return set(typed("integer"), "minimum", ob_int(1)); /* _timeout, _eachConcurrency */
}

/* The meta-properties of a call of tool schema s (NULL: none), into props; each
 * nullable unless s requires it; a rule of the tool's own replaces the general one. */
static ob_value *metas(conv *c, ob_value *props, const ob_value *s, ob_value **req) {
  const ob_value *tp = get(s, "properties"), *tr = get(s, "required");
  for (size_t i = 0; i < NMETAS; i++) {
    const ob_value *own = get(tp, METAS[i]);
    ob_value *x = NULL;
    if (own) {
      c->where.len = 0;
      ob_buf_addf(&c->where, "/%s", METAS[i]);
      x = convert(c, own, 0, 2);
      c->where.len = 0;
      if (x && !get(x, "enum") && !get(x, "pattern")) { /* not narrower than the general rule */
        ob_unref(x);
        x = NULL;
      }
    }
    if (!x)
      x = meta_rule(METAS[i]);
    if (!listed(tr, METAS[i]))
      x = nullable(x);
    props = set(props, METAS[i], x);
    *req = ob_array_push(*req, ob_cstring(METAS[i]));
  }
  return props;
}

static ob_value *tool_call(conv *c, const ob_tool *t, const char *api) {
  const ob_value *s = t->schema_value && ob_typeof(t->schema_value) == OB_OBJECT ? t->schema_value
                                                                                : NULL;
  c->root = s;
  c->tool = t->name;
  ob_value *props = ob_object(), *req = ob_array();
  props = set(props, "_tool", set(typed("string"), "enum", ob_array_push(ob_array(), ob_cstring(api))));
  req = ob_array_push(req, ob_cstring("_tool"));
  const ob_value *tp = get(s, "properties"), *tr = get(s, "required");
  if (!s)
    note(c, "a tool without a schema takes any params: strict mode can give it none");
  else if (!tp && !(get(s, "additionalProperties") && ob_typeof(get(s, "additionalProperties")) == OB_FALSE))
    note(c, "params without properties (any keys) cannot be said in strict mode: none are");
  ob_object_iter it;
  ob_value *k, *v;
  if (tp && ob_typeof(tp) == OB_OBJECT) {
    ob_object_iter_init(&it, tp);
    while (ob_object_iter_next(&it, &k, &v)) {
      if (ob_string_ptr(k)[0] == '_')
        continue;
      c->where.len = 0;
      ob_buf_addc(&c->where, '/');
      ob_buf_add(&c->where, ob_string_ptr(k), ob_string_len(k));
      ob_value *x = convert(c, v, 1, 2);
      if (!x)
        note(c, "a param no value may have (false) is left out");
      c->where.len = 0;
      if (!x)
        continue;
      if (!listed(tr, ob_string_ptr(k)))
        x = nullable(x);
      props = ob_object_setv(props, k, x);
      req = ob_array_push(req, ob_ref(k));
    }
  }
  props = metas(c, props, s, &req);
  ob_value *o = typed("object");
  if (t->description && *t->description)
    o = set(o, "description", ob_cstring(t->description));
  o = set(o, "properties", props);
  o = set(o, "required", req);
  return set(o, "additionalProperties", ob_false());
}

static ob_value *delegate_call(conv *c) {
  ob_value *props = ob_object(), *req = ob_array();
  props = set(props, "_delegate", typed("string"));
  props = set(props, "_tool", nullable(typed("string")));
  props = set(props, "_scopes", nullable(set(typed("array"), "items", typed("string"))));
  req = ob_array_push(ob_array_push(ob_array_push(req, ob_cstring("_delegate")), ob_cstring("_tool")),
                      ob_cstring("_scopes"));
  props = metas(c, props, NULL, &req);
  ob_value *o = typed("object");
  o = set(o, "description",
          ob_cstring("runs the plan file _delegate names (a path from the plan's folder), with "
                     "an empty input: strict mode cannot say its params"));
  o = set(o, "properties", props);
  o = set(o, "required", req);
  return set(o, "additionalProperties", ob_false());
}

static ob_value *retry_def(void) {
  ob_value *p = ob_object();
  p = set(p, "attempts", set(typed("integer"), "minimum", ob_int(1)));
  p = set(p, "delay_ms", nullable(set(typed("integer"), "minimum", ob_int(0))));
  p = set(p, "backoff", nullable(set(typed("number"), "minimum", ob_int(1))));
  p = set(p, "max_delay_ms", nullable(set(typed("integer"), "minimum", ob_int(0))));
  p = set(p, "jitter", nullable(typed("boolean")));
  ob_value *names = ob_array();
  ob_value *k, *v;
  ob_object_iter it;
  ob_object_iter_init(&it, p);
  while (ob_object_iter_next(&it, &k, &v))
    names = ob_array_push(names, ob_ref(k));
  ob_value *o = set(set(typed("object"), "properties", p), "required", names);
  o = set(o, "additionalProperties", ob_false());
  ob_value *count = set(typed("integer"), "minimum", ob_int(1));
  ob_value *any = ob_object_set(ob_object(), "anyOf", 5, ob_array_push(ob_array_push(ob_array(), count), o));
  return set(any, "description",
             ob_cstring("attempts in all (the first included), or {attempts, delay_ms, backoff, "
                        "max_delay_ms, jitter}, null for the defaults"));
}

/* --- the limits -------------------------------------------------------------------------- */

typedef struct measure {
  const ob_value *defs;
  size_t props, enums, chars;
  int big_enum; /* a string enum of more than BIG_ENUM values past BIG_ENUM_CHARS */
} measure;

static size_t chars(const ob_value *s) {
  size_t n = 0, len = ob_string_len(s);
  const unsigned char *p = (const unsigned char *)ob_string_ptr(s);
  for (size_t i = 0; i < len; i++)
    n += (p[i] & 0xC0) != 0x80;
  return n;
}

/* Counts s's properties, enum values and characters (each $def once: walked from the
 * root and the $defs themselves, never through a $ref). */
static void count(measure *m, const ob_value *s) {
  ob_object_iter it;
  ob_value *k, *v;
  if (!s)
    return;
  if (ob_typeof(s) == OB_ARRAY) {
    for (size_t i = 0; i < ob_array_len(s); i++)
      count(m, ob_array_get(s, i));
    return;
  }
  if (ob_typeof(s) != OB_OBJECT)
    return;
  const ob_value *props = get(s, "properties"), *en = get(s, "enum"), *cn = get(s, "const");
  if (props && ob_typeof(props) == OB_OBJECT) {
    m->props += ob_object_len(props);
    ob_object_iter_init(&it, props);
    while (ob_object_iter_next(&it, &k, &v)) {
      m->chars += chars(k);
      count(m, v);
    }
  }
  if (en && ob_typeof(en) == OB_ARRAY) {
    size_t n = 0;
    m->enums += ob_array_len(en);
    for (size_t i = 0; i < ob_array_len(en); i++)
      if (ob_typeof(ob_array_get(en, i)) == OB_STRING)
        n += chars(ob_array_get(en, i));
    m->chars += n;
    if (ob_array_len(en) > BIG_ENUM && n > BIG_ENUM_CHARS)
      m->big_enum = 1;
  }
  if (cn && ob_typeof(cn) == OB_STRING)
    m->chars += chars(cn);
  count(m, get(s, "items"));
  count(m, get(s, "anyOf"));
}

/* The deepest nesting of objects from s, $refs followed (ours never loop: a $def refers
 * only to defs made before it, but the walk is bounded all the same). */
static int levels(const measure *m, const ob_value *s, int budget) {
  if (budget <= 0 || !s)
    return 0;
  if (ob_typeof(s) == OB_ARRAY) {
    int most = 0;
    for (size_t i = 0; i < ob_array_len(s); i++) {
      int d = levels(m, ob_array_get(s, i), budget);
      most = d > most ? d : most;
    }
    return most;
  }
  if (ob_typeof(s) != OB_OBJECT)
    return 0;
  const ob_value *r = get(s, "$ref");
  if (r && ob_typeof(r) == OB_STRING && !strncmp(ob_string_ptr(r), "#/$defs/", 8)) {
    const char *name = ob_string_ptr(r) + 8;
    return levels(m, ob_object_get(m->defs, name, strlen(name)), budget - 1);
  }
  int most = 0, d;
  const ob_value *props = get(s, "properties");
  if (props && ob_typeof(props) == OB_OBJECT) {
    ob_object_iter it;
    ob_value *k, *v;
    ob_object_iter_init(&it, props);
    while (ob_object_iter_next(&it, &k, &v))
      if ((d = levels(m, v, budget - 1)) > most)
        most = d;
  }
  if ((d = levels(m, get(s, "items"), budget - 1)) > most)
    most = d;
  if ((d = levels(m, get(s, "anyOf"), budget - 1)) > most)
    most = d;
  const ob_value *t = get(s, "type");
  int object = t && ob_typeof(t) == OB_STRING && !strcmp(ob_string_ptr(t), "object");
  for (size_t i = 0; t && ob_typeof(t) == OB_ARRAY && i < ob_array_len(t); i++)
    object |= !strcmp(ob_string_ptr(ob_array_get(t, i)), "object");
  return most + object;
}

static void limits(ob_value *schema, ob_value **notes) {
  measure m = {get(schema, "$defs"), 0, 0, 0, 0};
  count(&m, schema);
  ob_object_iter it;
  ob_value *k, *v;
  ob_object_iter_init(&it, m.defs);
  while (ob_object_iter_next(&it, &k, &v)) {
    m.chars += chars(k);
    count(&m, v);
  }
  char msg[256];
#define LIMIT_NOTE(...)                                                                          \
  do {                                                                                           \
    snprintf(msg, sizeof msg, __VA_ARGS__);                                                      \
    *notes = ob_array_push(*notes, ob_cstring(msg));                                             \
  } while (0)
  if (m.props > MAX_PROPERTIES)
    LIMIT_NOTE("the schema has %zu object properties: strict mode takes %d (fewer tools?)",
               m.props, MAX_PROPERTIES);
  if (m.enums > MAX_ENUM_VALUES)
    LIMIT_NOTE("the schema has %zu enum values: strict mode takes %d (fewer tools?)", m.enums,
               MAX_ENUM_VALUES);
  if (m.chars > MAX_CHARS)
    LIMIT_NOTE("the schema's names and enum values have %zu characters: strict mode takes %d",
               m.chars, MAX_CHARS);
  if (m.big_enum)
    LIMIT_NOTE("an enum of more than %d strings has more than %d characters: strict mode "
               "refuses it", BIG_ENUM, BIG_ENUM_CHARS);
  int depth = levels(&m, schema, 64);
  if (depth > MAX_LEVELS)
    LIMIT_NOTE("objects nest %d levels deep: strict mode takes %d", depth, MAX_LEVELS);
#undef LIMIT_NOTE
}

/* --- the plan ----------------------------------------------------------------------------- */

static int by_name(const void *a, const void *b) {
  return strcmp((*(const ob_tool *const *)a)->name, (*(const ob_tool *const *)b)->name);
}

ob_value *ob_catalog_plan_schema_strict(const ob_engine *e, ob_value **notes) {
  *notes = ob_array();
  conv c = {NULL, NULL, notes, {0}, 0};
  ob_buf_init(&c.where);
  ob_buf_add(&c.where, "", 0);
  ob_toolnames names;
  ob_toolnames_init(&names, &e->tools);
  const ob_tool **ts = ob_xmalloc((names.n + 1) * sizeof *ts);
  for (size_t i = 0; i < names.n; i++)
    ts[i] = names.val[i];
  qsort(ts, names.n, sizeof *ts, by_name);

  ob_value *defs = ob_object(), *calls = ob_array();
  for (size_t i = 0; i < names.n; i++) {
    const char *api = ob_toolnames_api(&names, ts[i]->name);
    char key[96];
    snprintf(key, sizeof key, "tool_%s", api);
    defs = ob_object_set(defs, key, strlen(key), tool_call(&c, ts[i], api));
    calls = ob_array_push(calls, def(key));
  }
  c.tool = "(delegate)";
  defs = set(defs, "delegate", delegate_call(&c));
  calls = ob_array_push(calls, def("delegate"));
  free(ts);
  ob_toolnames_free(&names);
  ob_buf_free(&c.where);

  defs = set(defs, "call", ob_object_set(ob_object(), "anyOf", 5, calls));
  defs = set(defs, "reference",
             set(set(typed("string"), "pattern", ob_cstring("^\xE2\x80\xA0")), "description",
                 ob_cstring("a reference expression: \xE2\x80\xA0kind.path, alternatives with "
                            "||, all of them with &&")));
  defs = set(defs, "outputPath",
             set(set(typed("string"), "pattern", ob_cstring("^\xE2\x80\xA0")), "description",
                 ob_cstring("where the result goes: \xE2\x80\xA0kind.path, or alternatives "
                            "with || for obelus.branch")));
  ob_value *methods = ob_array();
  for (int m = OB_METHOD_SET; m <= OB_METHOD_CONCAT; m++)
    methods = ob_array_push(methods, ob_cstring(ob_method_name((ob_method)m)));
  defs = set(defs, "outputMethod", set(typed("string"), "enum", methods));
  defs = set(defs, "retry", retry_def());

  ob_value *props = ob_object();
  props = set(props, "plan", set(set(typed("array"), "items", def("call")), "description",
                                 ob_cstring("the calls, run as their inputs exist")));
  props = set(props, "output",
              set(nullable(typed("string")), "description",
                  ob_cstring("the final output: a reference (\xE2\x80\xA0state.x) or text; "
                             "null: the state")));
  ob_value *ids = set(set(typed("array"), "items", typed("string")), "minItems", ob_int(1));
  props = set(props, "instances",
              set(nullable(ids), "description",
                  ob_cstring("instance ids: each call without _instance runs once per "
                             "instance; null: none")));
  ob_value *req = ob_array();
  req = ob_array_push(req, ob_cstring("plan"));
  req = ob_array_push(req, ob_cstring("output"));
  req = ob_array_push(req, ob_cstring("instances"));
  ob_value *s = typed("object");
  s = set(s, "description",
          ob_cstring("an obelus plan for these tools, for strict structured output: every key "
                     "is given, null meaning absent"));
  s = set(s, "properties", props);
  s = set(s, "required", req);
  s = set(s, "additionalProperties", ob_false());
  s = set(s, "$defs", defs);
  limits(s, notes);
  return s;
}
