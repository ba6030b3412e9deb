/* ob_plan.c -- loading and validating plans (plan-format §5) and deriving their dependency graph.
 *
 * Validation collects every problem instead of stopping at the first, so a
 * planner (or a person) can fix them all in one go; nothing runs unless the
 * list is empty.
 *
 * The graph: call B depends on call A when a path A may write and a path B
 * reads share kind and scope (A's global, or both in B's instance) and one
 * is a prefix of the other. Writers are indexed in a trie per (kind, scope)
 * keyed by path segments, so each read costs O(depth) to find the writers of
 * its prefixes plus the size of the subtree below it (the writers of longer
 * paths): no call is compared with every other. Cycles are found with Kahn's
 * algorithm; what is left over is walked to name the calls on each cycle.
 *
 * Delegation is confined: plans are untrusted (a model writes them), so a
 * _delegate path may only name a plan inside the plans root (the folder of
 * the plan the run started from, or --plans-root; every delegated plan keeps
 * its caller's root). An absolute path, a ".." that climbs out (taken
 * lexically from the calling plan's real folder), or a real path (symbolic
 * links followed) outside the root is refused before anything is read, and
 * a delegated file that is not JSON is reported without its text: no
 * message quotes a file that is not a plan under the root. Missing files are
 * judged by their deepest existing folder, so their absence tells nothing of
 * what lies outside. The same check runs at validation and again when the
 * call runs (ob_delegate.c), on the real path it resolved.
 *
 * Memory: a call's record, its params as a value, and its parsed references and
 * output paths, except what it repeats of the calls read just before it (the
 * memo below): readers of one reference, the copies of an instanced call.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/ob_mem.h"
#include "base/ob_suggest.h"
#include "plan/ob_nulls.h"
#include "plan/ob_plan.h"
#include "plan/ob_toolname.h"

static void add_error(ob_plan *p, char *msg) {
  p->errors = realloc(p->errors, (p->nerrors + 1) * sizeof *p->errors);
  if (!p->errors)
    abort();
  p->errors[p->nerrors++] = msg;
}

static void vplan_error(ob_plan *p, const ob_call *c, const char *fmt, va_list ap) {
  if (p->quiet)
    return;
  ob_buf b;
  ob_buf_init(&b);
  if (c)
    ob_buf_addf(&b, "%s: call %s (%s): ", p->file, c->id, c->tool_name);
  else
    ob_buf_addf(&b, "%s: ", p->file);
  char tmp[1024];
  vsnprintf(tmp, sizeof tmp, fmt, ap);
  ob_buf_add(&b, tmp, strlen(tmp));
  add_error(p, b.data);
}

void ob_plan_error(ob_plan *p, const ob_call *c, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vplan_error(p, c, fmt, ap);
  va_end(ap);
}

static ob_value *field(const ob_value *o, const char *name) {
  return ob_object_get(o, name, strlen(name));
}

/* A key of the plan object, null being absent (ob_nulls.h). */
static ob_value *present(const ob_value *o, const char *name) {
  ob_value *v = field(o, name);
  return v && ob_typeof(v) != OB_NULL ? v : NULL;
}

/* Whether string v holds a NUL byte: a name, an id, a path or a file name with
 * one would be cut at it by every C string that carries it ("echo\u0000x" would
 * run echo, a _delegate would be checked on one file and read as another), so
 * each is a validation error. */
static int has_nul(const ob_value *v) {
  return ob_typeof(v) == OB_STRING && memchr(ob_string_ptr(v), '\0', ob_string_len(v)) != NULL;
}

/* --- finding references in params -------------------------------------- */

typedef struct walk {
  ob_plan *plan;
  ob_call *call; /* NULL while walking the output template */
  ob_buf where, pointer;
} walk;

/* What the calls of a plan repeat is parsed once. The reader keeps the last
 * MEMO_SLOTS references it parsed, by a hash of their text, and as many
 * _outputPath texts with their paths' canonical texts. A call that writes one
 * again shares it, and also the names of the param it sits in when that is the
 * same place. The call that parsed it owns it: ob_plan_free frees it with that
 * call. A fan-out's readers, and each instance's copies of a call, are read one
 * after another, so a small memo catches them. Text pointers are borrowed from the
 * calls' raw values (alive while the plan is read); the memo goes when reading
 * ends. Measured: fanout 100000 (100,000 readers of "\u2020state.src") 20 MB less,
 * and paired against the build before (9 rounds) fanout / floor 3.68x to 2.96x;
 * 60,000 instanced calls checked in 0.098 s rather than 0.131 s, 12 MB less. */
#define MEMO_SLOTS 64
typedef struct ob_expr_memo {
  struct {
    const char *text; /* NULL: empty slot */
    size_t len;
    ob_expr e;
    char *where, *pointer; /* the place of the call's that parsed it */
  } slot[MEMO_SLOTS];
  struct { /* the same for _outputPath (parsed in output mode), with each part's text */
    const char *text;
    size_t len;
    ob_expr e;
    ob_value **texts;
  } out[MEMO_SLOTS];
} ob_expr_memo;

typedef struct ref_like {
  char *where, *pointer;
} ref_like;

/* Records reference e at the walk's place. like: the earlier reference whose expression
 * e is (NULL: e is new, this call's); its where and pointer are taken too when they name
 * the same place. Returns the record (until the call's next reference moves the list). */
static const ob_param_ref *add_ref(walk *w, const ob_expr *e, const ref_like *like) {
  ob_call *c = w->call; /* NULL: the output template's (ob_plan.out_refs) */
  ob_param_ref **list = c ? &c->refs : &w->plan->out_refs;
  uint32_t *n = c ? &c->nrefs : &w->plan->nout_refs;
  *list = realloc(*list, (*n + 1) * sizeof **list);
  if (!*list)
    abort();
  ob_param_ref *r = &(*list)[(*n)++];
  const char *where = w->where.data ? w->where.data : "";
  const char *pointer = w->pointer.data ? w->pointer.data : "";
  r->expr = *e;
  r->owns_expr = !like;
  r->owns_place = !like || strcmp(like->where, where) || strcmp(like->pointer, pointer);
  r->where = r->owns_place ? ob_xstrdup(where) : like->where;
  r->pointer = r->owns_place ? ob_xstrdup(pointer) : like->pointer;
  size_t parts = 0;
  for (size_t a = 0; a < e->n; a++)
    parts += e->alts[a].n;
  r->nparts = (uint32_t)parts;
  memset(&r->seen, 0, sizeof r->seen);
  if (parts > sizeof r->seen.in)
    r->seen.heap = ob_xcalloc(parts, 1);
  return r;
}

/* A †each string of the params: "†each.value", a path below it ("†each.value.url",
 * "†each.value[0]") or "†each.index", in a call with _each only, standing alone (no ||,
 * no &&). Its place is kept for the schema check (the copies hold the element there). */
static void each_string(walk *w, const char *s, size_t n) {
  ob_call *c = w->call;
  if (!c) {
    ob_plan_error(w->plan, NULL, "output%s%s: %.*s is only for the params of a call with _each "
                  "(its list's element)", w->where.len ? " " : "", w->where.len ? w->where.data : "",
                  (int)(n > 200 ? 200 : n), s);
    return;
  }
  if (!c->each) {
    ob_plan_error(w->plan, c, "parameter \"%s\": %.*s is only for a call with _each (the "
                  "element of its list)", w->where.data, (int)(n > 200 ? 200 : n), s);
    return;
  }
  ob_expr e;
  ob_error err;
  const char *bad = NULL;
  if (ob_expr_parse(s, n, OB_EXPR_INPUT, &e, &err) != OB_OK) {
    ob_plan_error(w->plan, c, "parameter \"%s\": %s", w->where.data, err.msg);
    return;
  }
  const ob_path *pa = &e.alts[0].refs[0].path;
  if (e.n != 1 || e.alts[0].n != 1)
    bad = "stands alone (no || or && with it)";
  else if (!pa->n || (strcmp(pa->segs[0].key, "value") && strcmp(pa->segs[0].key, "index")) ||
           (!strcmp(pa->segs[0].key, "index") && pa->n > 1))
    bad = "is †each.value (or a path below it: †each.value.url) or †each.index";
  ob_expr_free(&e);
  if (bad) {
    ob_plan_error(w->plan, c, "parameter \"%s\": %.*s: an _each call's element %s",
                  w->where.data, (int)(n > 200 ? 200 : n), s, bad);
    return;
  }
  c->each_at = ob_xrealloc(c->each_at, (c->neach_at + 1) * sizeof *c->each_at);
  c->each_at[c->neach_at++] = ob_xstrdup(w->pointer.data ? w->pointer.data : "");
}

#if defined(__GNUC__)
#define NOINLINE __attribute__((noinline))
#else
#define NOINLINE
#endif

/* A string of the params: parsed when it is a reference. Kept out of find_refs, which
 * recurses once per nesting level of a plan (at most OB_JOURNAL_MAX_DEPTH), so that
 * its frame stays small: the parse's error and expression live here, one at a time. */
static NOINLINE void find_ref_string(walk *w, const ob_value *v) {
  {
    const char *s = ob_string_ptr(v);
    size_t n = ob_string_len(v);
    int cls = ob_str_classify(s, n);
    if (cls == OB_STR_LITERAL && w->call)
      w->call->nliterals++;
    if (cls == OB_STR_EACH)
      each_string(w, s, n);
    if (cls != OB_STR_EXPR)
      return;
    ob_expr_memo *memo = w->call ? w->plan->memo : NULL;
    size_t at = memo ? ob_key_hash(s, n) % MEMO_SLOTS : 0;
    if (memo && memo->slot[at].text && memo->slot[at].len == n &&
        !memcmp(memo->slot[at].text, s, n)) {
      ref_like like = {memo->slot[at].where, memo->slot[at].pointer};
      add_ref(w, &memo->slot[at].e, &like);
      return;
    }
    ob_expr e;
    ob_error err;
    if (ob_expr_parse(s, n, OB_EXPR_INPUT, &e, &err) != OB_OK) {
      if (w->call)
        ob_plan_error(w->plan, w->call, "parameter \"%s\": %s", w->where.data, err.msg);
      else
        ob_plan_error(w->plan, NULL, "output%s%s: %s", w->where.len ? " " : "",
                      w->where.len ? w->where.data : "", err.msg);
      return;
    }
    const ob_param_ref *r = add_ref(w, &e, NULL);
    if (memo) {
      memo->slot[at].text = s;
      memo->slot[at].len = n;
      memo->slot[at].e = e;
      memo->slot[at].where = r->where;
      memo->slot[at].pointer = r->pointer;
    }
  }
}

/* Visits every string at any depth; references are parsed and recorded (a call's,
 * or the output template's). `where` and `pointer` name the place for messages. Recursive, with
 * a small frame, over a plan's nesting (bounded: OB_JOURNAL_MAX_DEPTH). */
static void find_refs(walk *w, const ob_value *v) {
  size_t wl = w->where.len, pl = w->pointer.len;
  switch (ob_typeof(v)) {
  case OB_STRING:
    find_ref_string(w, v);
    return;
  case OB_ARRAY:
    for (size_t i = 0; i < ob_array_len(v); i++) {
      ob_buf_addf(&w->where, "[%zu]", i);
      ob_buf_addf(&w->pointer, "/%zu", i);
      find_refs(w, ob_array_get(v, i));
      w->where.len = wl, w->pointer.len = pl;
      w->where.data[wl] = w->pointer.data[pl] = '\0';
    }
    return;
  case OB_OBJECT: {
    ob_object_iter it;
    ob_value *k, *x;
    ob_object_iter_init(&it, v);
    while (ob_object_iter_next(&it, &k, &x)) {
      if (w->where.len)
        ob_buf_addc(&w->where, '.');
      ob_buf_add(&w->where, ob_string_ptr(k), ob_string_len(k));
      ob_buf_addc(&w->pointer, '/');
      for (const char *s = ob_string_ptr(k); s < ob_string_ptr(k) + ob_string_len(k); s++) {
        if (*s == '~')
          ob_buf_add(&w->pointer, "~0", 2);
        else if (*s == '/')
          ob_buf_add(&w->pointer, "~1", 2);
        else
          ob_buf_addc(&w->pointer, *s);
      }
      find_refs(w, x);
      w->where.len = wl, w->pointer.len = pl;
      if (w->where.data)
        w->where.data[wl] = '\0';
      w->pointer.data[pl] = '\0';
    }
    return;
  }
  default: return;
  }
}

/* --- reading calls -------------------------------------------------------- */

static const char *const known_meta[] = {"_tool",     "_outputPath", "_outputMethod",
                                         "_instance", "_id",         "_delegate",
                                         "_scopes",   "_timeout",    "_retry",
                                         "_each",     "_eachConcurrency"};

static int is_one_of(const char *s, const char *const *list, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(s, list[i]))
      return 1;
  return 0;
}

/* A whole number in [lo, hi] (1.0 counts as 1), or -1 when v is not one. */
static int64_t whole_in(const ob_value *v, int64_t lo, int64_t hi) {
  int64_t n;
  if (ob_typeof(v) == OB_INT)
    n = ob_int_value(v);
  else if (ob_typeof(v) == OB_REAL && ob_real_value(v) == floor(ob_real_value(v)) &&
           fabs(ob_real_value(v)) < 1e15)
    n = (int64_t)ob_real_value(v);
  else
    return -1;
  return n < lo || n > hi ? -1 : n;
}

/* The longest wait a timer takes here: about 49 days. */
#define OB_MAX_MS 4294967295LL

/* _timeout: milliseconds per attempt, a whole number >= 1. */
static void read_timeout(ob_plan *p, ob_call *c, const ob_value *v) {
  if (!v)
    return;
  int64_t ms = whole_in(v, 1, OB_MAX_MS);
  if (ms < 0 && ob_is_number(v))
    ob_plan_error(p, c, "_timeout must be a whole number of milliseconds from 1 to %lld, not %g",
                  OB_MAX_MS, ob_real_value(v));
  else if (ms < 0)
    ob_plan_error(p, c, "_timeout must be a whole number of milliseconds from 1 to %lld, not %s",
                  OB_MAX_MS, ob_type_name(ob_typeof(v)));
  else
    c->timeout_ms = (uint32_t)ms;
}

/* _retry: N (attempts in all) or {attempts, delay_ms, backoff, max_delay_ms,
 * jitter}; the defaults are 200 ms, 2, 30 s and jitter on. */
static void read_retry(ob_plan *p, ob_call *c, const ob_value *v) {
  c->retry = (ob_retry){.attempts = 1, .delay_ms = 200, .max_delay_ms = 30000, .jitter = 1, .backoff = 2.0};
  if (!v)
    return;
  if (ob_typeof(v) != OB_OBJECT) {
    int64_t n = whole_in(v, 1, OB_RETRY_MAX_ATTEMPTS);
    if (n < 0)
      ob_plan_error(p, c, "_retry must be the number of attempts (a whole number from 1 to %d, "
                          "the first included) or an object {attempts, delay_ms, backoff, "
                          "max_delay_ms, jitter}", OB_RETRY_MAX_ATTEMPTS);
    else
      c->retry.attempts = (uint32_t)n;
    return;
  }
  ob_object_iter it;
  ob_value *k, *x;
  ob_object_iter_init(&it, v);
  while (ob_object_iter_next(&it, &k, &x)) {
    const char *key = ob_string_ptr(k);
    int64_t n;
    if (ob_typeof(x) == OB_NULL) /* absent, as a null meta-property is (ob_nulls.h) */
      continue;
    if (!strcmp(key, "attempts")) {
      if ((n = whole_in(x, 1, OB_RETRY_MAX_ATTEMPTS)) < 0)
        ob_plan_error(p, c, "_retry.attempts must be a whole number from 1 to %d (the first "
                            "attempt included)", OB_RETRY_MAX_ATTEMPTS);
      else
        c->retry.attempts = (uint32_t)n;
    } else if (!strcmp(key, "delay_ms") || !strcmp(key, "max_delay_ms")) {
      if ((n = whole_in(x, 0, OB_MAX_MS)) < 0)
        ob_plan_error(p, c, "_retry.%s must be a whole number of milliseconds from 0 to %lld",
                      key, OB_MAX_MS);
      else if (key[0] == 'd')
        c->retry.delay_ms = (uint32_t)n;
      else
        c->retry.max_delay_ms = (uint32_t)n;
    } else if (!strcmp(key, "backoff")) {
      if (!ob_is_number(x) || ob_real_value(x) < 1 || ob_real_value(x) > 1000)
        ob_plan_error(p, c, "_retry.backoff must be a number from 1 to 1000 (the factor of each "
                            "wait over the one before)");
      else
        c->retry.backoff = ob_real_value(x);
    } else if (!strcmp(key, "jitter")) {
      if (ob_typeof(x) != OB_TRUE && ob_typeof(x) != OB_FALSE)
        ob_plan_error(p, c, "_retry.jitter must be true or false");
      else
        c->retry.jitter = ob_typeof(x) == OB_TRUE;
    } else {
      ob_plan_error(p, c, "_retry has an unknown key \"%.40s\" (known: attempts, delay_ms, "
                          "backoff, max_delay_ms, jitter)", key);
    }
  }
  ob_value *attempts = field(v, "attempts");
  if (!attempts || ob_typeof(attempts) == OB_NULL)
    ob_plan_error(p, c, "_retry.attempts is missing: the number of attempts in all");
}

/* _each and _eachConcurrency: 1 with *e parsed when the call has a list (c->each set
 * before its params are walked: their †each strings are its). */
static int read_each(ob_plan *p, ob_call *c, const ob_value *raw, ob_expr *e) {
  ob_value *v = field(raw, "_each"), *cap = field(raw, "_eachConcurrency");
  if (cap && !v)
    ob_plan_error(p, c, "_eachConcurrency only applies to a call with _each");
  if (!v)
    return 0;
  if (cap) {
    int64_t n = whole_in(cap, 1, UINT32_MAX);
    if (n < 0)
      ob_plan_error(p, c, "_eachConcurrency must be a whole number from 1 to %u (copies "
                          "running at once)", (unsigned)UINT32_MAX);
    else
      c->each_concurrency = (uint32_t)n;
  }
  ob_error err;
  if (ob_typeof(v) != OB_STRING ||
      ob_str_classify(ob_string_ptr(v), ob_string_len(v)) != OB_STR_EXPR) {
    ob_plan_error(p, c, "_each must be a reference to a list (\"" OB_DAGGER "state.items\"), "
                        "not %s", ob_typeof(v) == OB_STRING ? "plain text" : ob_type_name(ob_typeof(v)));
    return 0;
  }
  if (ob_expr_parse(ob_string_ptr(v), ob_string_len(v), OB_EXPR_INPUT, e, &err) != OB_OK) {
    ob_plan_error(p, c, "_each: %s", err.msg);
    return 0;
  }
  for (size_t a = 0; a < e->n; a++)
    if (e->alts[a].n != 1) { /* && joins parts into an array: not a list's one reference */
      ob_plan_error(p, c, "_each is one reference, or alternatives joined by ||, not parts "
                          "joined by &&");
      ob_expr_free(e);
      return 0;
    }
  c->each = 1;
  return 1;
}

/* Reads one call; as_instance (when not NULL) makes it that instance's copy. */
static void read_call(ob_plan *p, ob_call *c, const ob_value *raw, char *as_instance) {
  char idbuf[32];
  snprintf(idbuf, sizeof idbuf, "#%zu", c->index);
  ob_value *clean = ob_nulls_meta(raw); /* a null meta-property is absent (ob_nulls.h) */
  c->raw = clean ? clean : ob_ref((ob_value *)raw);
  raw = c->raw;
  c->method = OB_METHOD_SET;
  if (ob_typeof(raw) != OB_OBJECT) {
    c->id = ob_xstrdup(idbuf);
    c->tool_name = "?";
    ob_plan_error(p, c, "a call must be a JSON object, not %s", ob_type_name(ob_typeof(raw)));
    return;
  }
  ob_value *tool = field(raw, "_tool"), *id = field(raw, "_id");
  c->tool_name = tool && ob_typeof(tool) == OB_STRING && !has_nul(tool) ? ob_string_ptr(tool)
                                                                         : "?";
  if (id && ob_typeof(id) == OB_STRING && ob_string_len(id) > 0 &&
      (p->copies_of || !memchr(ob_string_ptr(id), '@', ob_string_len(id))) &&
      strlen(ob_string_ptr(id)) == ob_string_len(id)) {
    c->id = ob_xstrdup(ob_string_ptr(id));
  } else {
    c->id = ob_xstrdup(idbuf);
    if (id)
      ob_plan_error(p, c, "_id must be a non-empty string without '@' or a NUL byte");
  }
  if (as_instance) { /* a copy per instance: "<id>@<instance>" */
    size_t n = strlen(c->id), m = strlen(as_instance);
    char *copy = ob_xmalloc(n + m + 2);
    memcpy(copy, c->id, n);
    copy[n] = '@';
    memcpy(copy + n + 1, as_instance, m + 1);
    free(c->id);
    c->id = copy;
    c->instance = as_instance; /* the plan's: p->instances[k] */
    c->instance_shared = 1;
  }
  size_t idlen = strlen(c->id);
  if (ob_map_get(&p->ids, c->id, idlen))
    ob_plan_error(p, c, "_id \"%s\" is already the id of another call", c->id);
  else
    ob_map_put(&p->ids, c->id, idlen, c);
  ob_value *delegate = field(raw, "_delegate"), *scopes = field(raw, "_scopes");
  if (delegate && (ob_typeof(delegate) != OB_STRING || !ob_string_len(delegate))) {
    ob_plan_error(p, c, "_delegate must be the path of a plan file");
  } else if (delegate && has_nul(delegate)) {
    ob_plan_error(p, c, "_delegate holds a NUL byte (\\u0000): no file name can");
  } else if (delegate) {
    /* relative to the calling plan's folder */
    const char *d = ob_string_ptr(delegate), *slash = strrchr(p->file, '/');
    ob_buf b;
    ob_buf_init(&b);
    if (d[0] != '/' && slash)
      ob_buf_add(&b, p->file, (size_t)(slash - p->file) + 1);
    ob_buf_add(&b, d, strlen(d));
    c->delegate = b.data;
    if (!tool)
      c->tool_name = "delegate";
  }
  if (scopes && !delegate)
    ob_plan_error(p, c, "_scopes only applies to a call with _delegate");
  if (scopes && ob_typeof(scopes) != OB_ARRAY)
    ob_plan_error(p, c, "_scopes must be a list of kinds, e.g. [\"input\", \"state\"]");
  for (size_t i = 0; scopes && ob_typeof(scopes) == OB_ARRAY && i < ob_array_len(scopes); i++) {
    const ob_value *k = ob_array_get(scopes, i);
    ob_error kerr;
    ob_buf b;
    ob_buf_init(&b);
    if (ob_typeof(k) == OB_STRING)
      ob_buf_addf(&b, OB_DAGGER "%s", ob_string_ptr(k));
    ob_expr e;
    if (ob_typeof(k) != OB_STRING || has_nul(k) ||
        ob_expr_parse(b.data, b.len, OB_EXPR_INPUT, &e, &kerr) != OB_OK) {
      ob_plan_error(p, c, "_scopes[%zu] is not a kind name", i);
    } else {
      if (e.n != 1 || e.alts[0].n != 1 || e.alts[0].refs[0].path.n)
        ob_plan_error(p, c, "_scopes[%zu] is not a kind name", i);
      else {
        c->scopes = realloc(c->scopes, (c->nscopes + 1) * sizeof *c->scopes);
        if (!c->scopes)
          abort();
        c->scopes[c->nscopes++] = ob_xstrdup(ob_string_ptr(k));
      }
      ob_expr_free(&e);
    }
    ob_buf_free(&b);
  }
  if (!delegate && (!tool || ob_typeof(tool) != OB_STRING))
    ob_plan_error(p, c, "_tool is %s: every call names its tool with a string (or a plan with "
                        "_delegate)",
                  tool ? "not a string" : "missing");
  else if (tool && has_nul(tool))
    ob_plan_error(p, c, "_tool holds a NUL byte (\\u0000): no tool has such a name");

  ob_object_iter it;
  ob_value *k, *v;
  ob_object_iter_init(&it, raw);
  while (ob_object_iter_next(&it, &k, &v)) {
    const char *key = ob_string_ptr(k);
    if (key[0] != '_')
      continue;
    if (!is_one_of(key, known_meta, sizeof known_meta / sizeof *known_meta))
      ob_plan_error(p, c, "unknown meta-property %s (known: _tool, _outputPath, _outputMethod, "
                          "_instance, _id, _delegate, _scopes, _timeout, _retry, _each, "
                          "_eachConcurrency)", key);
  }
  read_timeout(p, c, field(raw, "_timeout"));
  read_retry(p, c, field(raw, "_retry"));

  ob_value *out = field(raw, "_outputPath"), *method = field(raw, "_outputMethod");
  ob_value *inst = field(raw, "_instance");
  size_t out_at = 0; /* its slot in the memo */
  if (out && ob_typeof(out) == OB_STRING && p->memo) { /* another call's, as written? */
    size_t len = ob_string_len(out);
    out_at = ob_key_hash(ob_string_ptr(out), len) % MEMO_SLOTS;
    if (p->memo->out[out_at].text && p->memo->out[out_at].len == len &&
        !memcmp(p->memo->out[out_at].text, ob_string_ptr(out), len)) {
      c->output = p->memo->out[out_at].e;
      c->output_text = p->memo->out[out_at].texts;
      c->has_output = c->output_shared = 1;
      out = NULL;
    }
  }
  if (out) {
    ob_error err;
    if (ob_typeof(out) != OB_STRING)
      ob_plan_error(p, c, "_outputPath must be a string");
    else if (ob_expr_parse(ob_string_ptr(out), ob_string_len(out), OB_EXPR_OUTPUT, &c->output,
                           &err) != OB_OK)
      ob_plan_error(p, c, "_outputPath: %s", err.msg);
    else
      c->has_output = 1;
    for (size_t a = 0; c->has_output && a < c->output.n; a++)
      for (size_t r = 0; r < c->output.alts[a].n; r++)
        if (!strcmp(c->output.alts[a].refs[r].kind, "each")) {
          ob_plan_error(p, c, "_outputPath: " OB_DAGGER "each is an _each call's element, which "
                              "no call writes");
          ob_expr_free(&c->output);
          c->has_output = 0;
          a = c->output.n;
          break;
        }
    if (c->has_output) { /* each path's text, as output messages name it in _path */
      size_t parts = 0, kk = 0;
      for (size_t a = 0; a < c->output.n; a++)
        parts += c->output.alts[a].n;
      c->output_text = ob_xcalloc(parts, sizeof *c->output_text);
      for (size_t a = 0; a < c->output.n; a++)
        for (size_t r = 0; r < c->output.alts[a].n; r++) {
          ob_buf b;
          ob_buf_init(&b);
          ob_path_format(&b, &c->output.alts[a].refs[r].path);
          c->output_text[kk++] = ob_string(b.data ? b.data : "", b.len);
          ob_buf_free(&b);
        }
      if (p->memo) {
        p->memo->out[out_at].text = ob_string_ptr(out);
        p->memo->out[out_at].len = ob_string_len(out);
        p->memo->out[out_at].e = c->output;
        p->memo->out[out_at].texts = c->output_text;
      }
    }
  }
  if (method) {
    int m = ob_typeof(method) == OB_STRING
                ? ob_method_parse(ob_string_ptr(method), ob_string_len(method))
                : -1;
    if (m < 0)
      ob_plan_error(p, c, "_outputMethod must be one of set, merge, assign, push, concat");
    else
      c->method = (ob_method)m;
  }
  if (inst) {
    if (ob_typeof(inst) != OB_STRING || ob_string_len(inst) == 0 || has_nul(inst))
      ob_plan_error(p, c, "_instance must be a non-empty string without a NUL byte");
    else
      c->instance = ob_xstrndup(ob_string_ptr(inst), ob_string_len(inst));
  }

  ob_expr each;
  int has_each = read_each(p, c, raw, &each);
  walk w = {p, c, {0}, {0}};
  ob_buf_init(&w.where);
  ob_buf_init(&w.pointer);
  ob_buf_add(&w.where, "", 0);
  ob_buf_add(&w.pointer, "", 0);
  ob_object_iter_init(&it, raw);
  while (ob_object_iter_next(&it, &k, &v)) {
    if (ob_string_ptr(k)[0] == '_')
      continue;
    w.where.len = w.pointer.len = 0;
    ob_buf_add(&w.where, ob_string_ptr(k), ob_string_len(k));
    ob_buf_addc(&w.pointer, '/');
    ob_buf_add(&w.pointer, ob_string_ptr(k), ob_string_len(k));
    find_refs(&w, v);
  }
  if (has_each) { /* the list's reference: after the params' own (ob_plan.h) */
    w.where.len = w.pointer.len = 0;
    ob_buf_add(&w.where, "_each", 5);
    ob_buf_add(&w.pointer, "/_each", 6);
    add_ref(&w, &each, NULL);
  }
  ob_buf_free(&w.where);
  ob_buf_free(&w.pointer);
}

/* --- the dependency graph -------------------------------------------------- */

typedef struct tnode {
  ob_map kids;
  size_t nw, capw;
  size_t *writers;
} tnode;

static tnode *tnode_new(void) { return ob_xcalloc(1, sizeof(tnode)); }

static void tnode_free(tnode *t) {
  size_t i = 0;
  ob_map_entry *e;
  while (ob_map_next(&t->kids, &i, &e))
    tnode_free(e->val);
  ob_map_free(&t->kids);
  free(t->writers);
  free(t);
}

/* The trie root for (kind, scope); made when `create`. */
static tnode *trie_root(ob_map *tries, const char *kind, const char *scope, int create) {
  size_t nk = strlen(kind) + 1, ns = scope ? strlen(scope) : 0;
  char small[128], *key = nk + ns <= sizeof small ? small : ob_xmalloc(nk + ns);
  memcpy(key, kind, nk);
  if (ns)
    memcpy(key + nk, scope, ns);
  tnode *t = ob_map_get(tries, key, nk + ns);
  if (!t && create) {
    t = tnode_new();
    ob_map_put(tries, key, nk + ns, t);
  }
  if (key != small)
    free(key);
  return t;
}

typedef struct linker {
  ob_plan *p;
  size_t reader;
  size_t *stamp;  /* stamp[a] == reader + 1: edge already added */
  int found;      /* a writer other than the reader was seen */
} linker;

static void link_writer(linker *l, size_t a) {
  if (a == l->reader)
    return;
  l->found = 1;
  if (l->stamp[a] == l->reader + 1)
    return;
  l->stamp[a] = l->reader + 1;
  ob_call *b = &l->p->calls[l->reader];
  b->deps = realloc(b->deps, (b->ndeps + 1) * sizeof *b->deps);
  if (!b->deps)
    abort();
  b->deps[b->ndeps++] = a;
}

static void link_node(linker *l, const tnode *t) {
  for (size_t i = 0; i < t->nw; i++)
    link_writer(l, t->writers[i]);
}

static void link_subtree(linker *l, const tnode *t) {
  size_t i = 0;
  ob_map_entry *e;
  while (ob_map_next(&t->kids, &i, &e)) {
    link_node(l, e->val);
    link_subtree(l, e->val);
  }
}

static void link_read(linker *l, tnode *root, const ob_path *path) {
  if (!root)
    return;
  const tnode *t = root;
  link_node(l, t);
  for (size_t s = 0; s < path->n; s++) {
    t = ob_map_get(&t->kids, path->segs[s].key, path->segs[s].keylen);
    if (!t)
      return;
    link_node(l, t);
  }
  link_subtree(l, t);
}

/* Does some writer in trie `root` write a path overlapping `path`? Every node lies on a
 * writer's path, so a walk that reaches path's node has found one below or at it. */
static int overlaps(const tnode *t, const ob_path *path) {
  if (t->nw)
    return 1;
  for (size_t s = 0; s < path->n; s++) {
    if (!(t = ob_map_get(&t->kids, path->segs[s].key, path->segs[s].keylen)))
      return 0;
    if (t->nw)
      return 1;
  }
  return 1;
}

/* The same in any scope of kind: the tries' keys are the kind, a NUL, the scope. */
static int overlaps_anywhere(const ob_map *tries, const char *kind, const ob_path *path) {
  size_t nk = strlen(kind) + 1, i = 0;
  ob_map_entry *e;
  while (ob_map_next(tries, &i, &e))
    if (e->len >= nk && !memcmp(e->key, kind, nk) && overlaps(e->val, path))
      return 1;
  return 0;
}

static void build_graph(ob_plan *p) {
  ob_map tries;
  ob_map_init(&tries);
  for (size_t i = 0; i < p->ncalls; i++) {
    ob_call *c = &p->calls[i];
    if (!c->has_output)
      continue;
    for (size_t a = 0; a < c->output.n; a++)
      for (size_t r = 0; r < c->output.alts[a].n; r++) {
        const ob_reference *ref = &c->output.alts[a].refs[r];
        tnode *t = trie_root(&tries, ref->kind, c->instance, 1);
        for (size_t s = 0; s < ref->path.n; s++) {
          tnode *kid = ob_map_get(&t->kids, ref->path.segs[s].key, ref->path.segs[s].keylen);
          if (!kid) {
            kid = tnode_new();
            ob_map_put(&t->kids, ref->path.segs[s].key, ref->path.segs[s].keylen, kid);
          }
          t = kid;
        }
        if (t->nw == t->capw) {
          t->capw = t->capw ? 2 * t->capw : 2;
          t->writers = realloc(t->writers, t->capw * sizeof *t->writers);
          if (!t->writers)
            abort();
        }
        t->writers[t->nw++] = i;
      }
  }
  linker l = {p, 0, ob_xcalloc(p->ncalls, sizeof(size_t)), 0};
  for (size_t b = 0; b < p->ncalls; b++) {
    ob_call *c = &p->calls[b];
    l.reader = b;
    for (size_t r = 0; r < c->nrefs; r++) {
      size_t part = 0;
      for (size_t a = 0; a < c->refs[r].expr.n; a++)
        for (size_t k = 0; k < c->refs[r].expr.alts[a].n; k++, part++) {
          const ob_reference *ref = &c->refs[r].expr.alts[a].refs[k];
          l.found = 0;
          link_read(&l, trie_root(&tries, ref->kind, NULL, 0), &ref->path);
          if (c->instance)
            link_read(&l, trie_root(&tries, ref->kind, c->instance, 0), &ref->path);
          ob_param_ref_seen(&c->refs[r])[part] = (unsigned char)l.found;
        }
    }
  }
  free(l.stamp);
  for (size_t r = 0; r < p->nout_refs; r++) { /* the output template's: any scope */
    ob_param_ref *ref = &p->out_refs[r];
    size_t part = 0;
    for (size_t a = 0; a < ref->expr.n; a++)
      for (size_t k = 0; k < ref->expr.alts[a].n; k++, part++)
        ob_param_ref_seen(ref)[part] = (unsigned char)overlaps_anywhere(
            &tries, ref->expr.alts[a].refs[k].kind, &ref->expr.alts[a].refs[k].path);
  }
  p->graphed = 1;
  /* the reverse edges, all in one block in call order: settling calls one
   * after another reads them one after another */
  size_t nedges = 0;
  for (size_t b = 0; b < p->ncalls; b++)
    for (size_t d = 0; d < p->calls[b].ndeps; d++, nedges++)
      p->calls[p->calls[b].deps[d]].nusers++;
  free(p->user_block);
  p->user_block = ob_xmalloc(nedges * sizeof *p->user_block);
  for (size_t a = 0, off = 0; a < p->ncalls; a++) {
    p->calls[a].users = p->user_block + off;
    off += p->calls[a].nusers;
    p->calls[a].nusers = 0;
  }
  for (size_t b = 0; b < p->ncalls; b++)
    for (size_t d = 0; d < p->calls[b].ndeps; d++) {
      ob_call *a = &p->calls[p->calls[b].deps[d]];
      a->users[a->nusers++] = b;
    }
  size_t i = 0;
  ob_map_entry *e;
  while (ob_map_next(&tries, &i, &e))
    tnode_free(e->val);
  ob_map_free(&tries);
}

/* Kahn's algorithm; every call left with unsettled dependencies is on or
 * behind a cycle. Walking dependencies from each leftover call finds them. */
static void find_cycles(ob_plan *p) {
  size_t n = p->ncalls, head = 0, tail = 0;
  size_t *pending = ob_xcalloc(n, sizeof(size_t)), *queue = ob_xcalloc(n, sizeof(size_t));
  for (size_t i = 0; i < n; i++)
    if (!(pending[i] = p->calls[i].ndeps))
      queue[tail++] = i;
  while (head < tail) {
    ob_call *c = &p->calls[queue[head++]];
    for (size_t u = 0; u < c->nusers; u++)
      if (--pending[c->users[u]] == 0)
        queue[tail++] = c->users[u];
  }
  if (tail < n) {
    /* mark: 0 untouched, 1 on the current walk (position+2 stored in pos), 2 done */
    unsigned char *mark = ob_xcalloc(n, 1);
    size_t *walkv = ob_xcalloc(n + 1, sizeof(size_t)), *pos = ob_xcalloc(n, sizeof(size_t));
    for (size_t start = 0; start < n; start++) {
      if (!pending[start] || mark[start])
        continue;
      size_t len = 0, at = start;
      while (!mark[at]) {
        mark[at] = 1;
        pos[at] = len;
        walkv[len++] = at;
        size_t next = at;
        for (size_t d = 0; d < p->calls[at].ndeps; d++)
          if (pending[p->calls[at].deps[d]]) {
            next = p->calls[at].deps[d];
            break;
          }
        at = next;
      }
      if (mark[at] == 1) { /* closed a new cycle: walkv[pos[at]..len) */
        ob_buf b;
        ob_buf_init(&b);
        for (size_t k = pos[at]; k < len; k++)
          ob_buf_addf(&b, "%s (%s) -> ", p->calls[walkv[k]].id, p->calls[walkv[k]].tool_name);
        ob_buf_addf(&b, "%s (%s)", p->calls[at].id, p->calls[at].tool_name);
        ob_plan_error(p, &p->calls[at], "dependency cycle: %s (each reads what the next writes)",
                      b.data);
        p->ncycles++;
        ob_buf_free(&b);
      }
      for (size_t k = 0; k < len; k++)
        mark[walkv[k]] = 2;
    }
    free(mark);
    free(walkv);
    free(pos);
  }
  free(pending);
  free(queue);
}

/* --- plans ------------------------------------------------------------------ */

/* A call the plan's instances replicate: an object without _instance. */
static int copied(const ob_value *raw) {
  ob_value *inst = ob_typeof(raw) == OB_OBJECT ? field(raw, "_instance") : NULL;
  return ob_typeof(raw) == OB_OBJECT && (!inst || ob_typeof(inst) == OB_NULL);
}

/* Adds instance s unless seen has it (a map: lists of thousands stay linear). */
static void add_instance(ob_plan *p, ob_map *seen, const char *s, size_t len) {
  if (ob_map_get(seen, s, len))
    return;
  ob_map_put(seen, s, len, p);
  p->instances = realloc(p->instances, (p->ninstances + 1) * sizeof *p->instances);
  if (!p->instances)
    abort();
  p->instances[p->ninstances++] = ob_xstrndup(s, len);
}

static void read_instance_list(ob_plan *p, const ob_value *v, ob_map *seen);

/* "instances": a list of ids, or "auto" for every _instance in the context. */
static void read_instances(ob_plan *p, const ob_value *v) {
  if (!v)
    return;
  ob_map seen;
  ob_map_init(&seen);
  read_instance_list(p, v, &seen);
  ob_map_free(&seen);
}

static void read_instance_list(ob_plan *p, const ob_value *v, ob_map *seen) {
  if (ob_typeof(v) == OB_STRING && !strcmp(ob_string_ptr(v), "auto")) {
    for (size_t i = 0; i < ob_array_len(p->context); i++) {
      const ob_value *m = ob_array_get(p->context, i);
      ob_value *inst = ob_typeof(m) == OB_OBJECT ? field(m, "_instance") : NULL;
        if (inst && ob_typeof(inst) == OB_STRING && ob_string_len(inst) && !has_nul(inst))
        add_instance(p, seen, ob_string_ptr(inst), ob_string_len(inst));
    }
    if (!p->ninstances)
      ob_plan_error(p, NULL, "\"instances\": \"auto\" found no _instance in the context");
    return;
  }
  if (ob_typeof(v) != OB_ARRAY || !ob_array_len(v)) {
    ob_plan_error(p, NULL, "\"instances\" must be a non-empty list of instance ids or \"auto\"");
    return;
  }
  for (size_t i = 0; i < ob_array_len(v); i++) {
    const ob_value *x = ob_array_get(v, i);
    if (ob_typeof(x) != OB_STRING || !ob_string_len(x) || has_nul(x)) {
      ob_plan_error(p, NULL, "\"instances\"[%zu] must be a non-empty string without a NUL byte",
                    i);
      continue;
    }
    size_t before = p->ninstances;
    add_instance(p, seen, ob_string_ptr(x), ob_string_len(x));
    if (p->ninstances == before)
      ob_plan_error(p, NULL, "\"instances\" lists \"%s\" twice", ob_string_ptr(x));
  }
}

/* Every schema a context message carries must compile: a schema that does not
 * (a bad pattern, "type": "objekt", a $ref to nowhere) would otherwise check
 * nothing, and writes it forbids would go through. Named by the message and by
 * the place in the schema ob_schema_compile gives. */
static void check_context_schemas(ob_plan *p) {
  for (size_t i = 0; i < ob_array_len(p->context); i++) {
    const ob_value *m = ob_array_get(p->context, i), *type, *schema;
    if (ob_typeof(m) != OB_OBJECT || !(schema = field(m, "schema")))
      continue;
    if ((type = field(m, "type")) && ob_typeof(type) == OB_STRING && !strcmp(ob_string_ptr(type), "plan"))
      continue; /* not a document's message (ob_log.c) */
    ob_error err;
    ob_schema *s = ob_schema_compile(schema, &err);
    if (!s)
      ob_plan_error(p, NULL, "context[%zu]: the schema is not usable: %s", i, err.msg);
    ob_schema_free(s);
  }
}

static ob_plan *plan_read(const ob_value *v, const char *name, int probe, size_t max_calls) {
  ob_plan *p = ob_xcalloc(1, sizeof *p);
  p->probe = probe;
  p->file = ob_xstrdup(name);
  ob_map_init(&p->ids);
  if (ob_depth(v) > OB_JOURNAL_MAX_DEPTH) { /* its journal could not be read back */
    ob_plan_error(p, NULL, "the plan is nested %u levels deep: at most %d",
                  (unsigned)ob_depth(v), OB_JOURNAL_MAX_DEPTH);
    p->context = ob_array();
    return p;
  }
  const ob_value *calls = v;
  p->context = ob_array();
  if (ob_typeof(v) == OB_OBJECT) {
    ob_object_iter it;
    ob_value *k, *x;
    ob_object_iter_init(&it, v);
    while (ob_object_iter_next(&it, &k, &x)) {
      const char *key = ob_string_ptr(k);
      if (!strcmp(key, "each") && ob_typeof(x) == OB_STRING && !p->copies_of)
        p->copies_of = ob_xstrdup(ob_string_ptr(x)); /* the engine's (ob_each.c) */
      else if (strcmp(key, "context") && strcmp(key, "plan") && strcmp(key, "output") &&
               strcmp(key, "instances"))
        ob_plan_error(p, NULL, "unknown key \"%s\" in the plan object (allowed: context, plan, "
                               "output, instances)", key);
    }
    ob_value *ctx = present(v, "context");
    if (ctx && ob_typeof(ctx) != OB_ARRAY)
      ob_plan_error(p, NULL, "\"context\" must be an array of messages");
    else if (ctx)
      p->context = ob_ref(ctx);
    check_context_schemas(p);
    if ((p->output = present(v, "output"))) {
      walk w = {p, NULL, {0}, {0}};
      ob_buf_init(&w.where);
      ob_buf_init(&w.pointer);
      ob_buf_add(&w.where, "", 0);
      ob_buf_add(&w.pointer, "", 0);
      find_refs(&w, p->output);
      ob_buf_free(&w.where);
      ob_buf_free(&w.pointer);
      ob_ref(p->output);
    }
    read_instances(p, present(v, "instances"));
    calls = field(v, "plan");
    if (!calls) {
      ob_plan_error(p, NULL, "the plan object has no \"plan\" (the list of calls)");
      return p;
    }
  }
  if (ob_typeof(calls) != OB_ARRAY) {
    ob_plan_error(p, NULL, "a plan is a JSON array of calls or an object with \"plan\": [...]");
    return p;
  }
  /* with instances, every call without _instance is copied once per instance */
  size_t n = 0, ntemplates = ob_array_len(calls);
  size_t copies = probe && p->ninstances ? 1 : p->ninstances;
  for (size_t i = 0; i < ntemplates; i++) {
    int each = p->ninstances && copied(ob_array_get(calls, i));
    n += each ? copies : 1;
    p->ncalls_all += each ? p->ninstances : 1;
  }
  /* instances x calls is known before a call is copied: a 357 KB plan of 5,000
   * instances x 5,000 calls would otherwise take gigabytes before the limit saw it */
  if (max_calls && p->ncalls_all > max_calls) {
    p->over_limit = 1;
    return p;
  }
  p->calls = ob_xcalloc(n, sizeof *p->calls);
  p->memo = ob_xcalloc(1, sizeof *p->memo);
  for (size_t i = 0; i < ntemplates; i++) {
    const ob_value *raw = ob_array_get(calls, i);
    if (!p->ninstances || !copied(raw)) {
      p->calls[p->ncalls].index = i;
      read_call(p, &p->calls[p->ncalls++], raw, NULL);
      continue;
    }
    for (size_t k = 0; k < copies; k++) {
      p->calls[p->ncalls].index = i;
      p->quiet += k > 0; /* one call's problems are reported once */
      read_call(p, &p->calls[p->ncalls++], raw, p->instances[k]);
      p->quiet -= k > 0;
    }
  }
  free(p->memo);
  p->memo = NULL;
  build_graph(p);
  find_cycles(p);
  return p;
}

ob_plan *ob_plan_from_value(const ob_value *v, const char *name) {
  return plan_read(v, name, 0, 0);
}

ob_plan *ob_plan_probe(const ob_value *v, const char *name) { return plan_read(v, name, 1, 0); }

ob_plan *ob_plan_read_within(const ob_value *v, const char *name, int probe, size_t max_calls) {
  return plan_read(v, name, probe, max_calls);
}

ob_plan *ob_plan_load(const char *file, ob_error *err) {
  ob_value *v = ob_json_parse_file(file, err);
  if (!v)
    return NULL;
  ob_plan *p = ob_plan_from_value(v, file);
  ob_unref(v);
  return p;
}

static void free_refs(ob_param_ref *refs, size_t n) {
  for (size_t r = 0; r < n; r++) {
    if (refs[r].owns_expr)
      ob_expr_free(&refs[r].expr);
    if (refs[r].owns_place) {
      free(refs[r].where);
      free(refs[r].pointer);
    }
    if (refs[r].nparts > sizeof refs[r].seen.in)
      free(refs[r].seen.heap);
  }
  free(refs);
}

void ob_plan_free(ob_plan *p) {
  if (!p)
    return;
  free_refs(p->out_refs, p->nout_refs);
  free(p->copies_of);
  for (size_t i = 0; i < p->ncalls; i++) {
    ob_call *c = &p->calls[i];
    free(c->id);
    ob_unref(c->raw);
    if (c->has_output && !c->output_shared) {
      size_t k = 0;
      for (size_t a = 0; a < c->output.n; a++)
        for (size_t r = 0; r < c->output.alts[a].n; r++)
          ob_unref(c->output_text[k++]);
      free(c->output_text);
      ob_expr_free(&c->output);
    }
    if (!c->instance_shared)
      free(c->instance);
    free(c->delegate);
    for (size_t k = 0; k < c->nscopes; k++)
      free(c->scopes[k]);
    free(c->scopes);
    for (size_t k = 0; k < c->neach_at; k++)
      free(c->each_at[k]);
    free(c->each_at);
    free_refs(c->refs, c->nrefs);
    free(c->deps);
  }
  free(p->user_block);
  free(p->calls);
  for (size_t i = 0; i < p->nerrors; i++)
    free(p->errors[i]);
  free(p->errors);
  ob_map_free(&p->ids);
  for (size_t i = 0; i < p->ninstances; i++)
    free(p->instances[i]);
  free(p->instances);
  ob_unref(p->context);
  ob_unref(p->output);
  free(p->file);
  free(p->root);
  free(p);
}

/* --- the plans root -------------------------------------------------------- */

char *ob_plan_default_root(const char *file) {
  const char *slash = file ? strrchr(file, '/') : NULL;
  if (!slash)
    return ob_xstrdup(".");
  return slash == file ? ob_xstrdup("/") : ob_xstrndup(file, (size_t)(slash - file));
}

char *ob_plans_root(const char *dir, ob_error *err) {
  char *real = realpath(dir ? dir : ".", NULL);
  struct stat st;
  if (!real || stat(real, &st) != 0 || !S_ISDIR(st.st_mode)) {
    ob_error_set(err, OB_EIO, 0, "the plans root %s: %s", dir ? dir : ".",
                 real ? "not a folder" : strerror(errno));
    free(real);
    return NULL;
  }
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_add(&b, real, strlen(real));
  free(real);
  if (b.data[b.len - 1] != '/') /* "/a/b/": then "/a/bc" is not inside */
    ob_buf_addc(&b, '/');
  return b.data;
}

/* Is the real path `real` the root (root ends in '/') or inside it? */
static int inside_root(const char *real, const char *root) {
  size_t n = strlen(root), len = strlen(real);
  return !strncmp(real, root, n) || (len + 1 == n && !strncmp(real, root, len));
}

/* Is base/rel inside root, its "." and ".." taken lexically? base is a real
 * path (absolute, no symbolic link), so only rel's own steps move it. */
static int lexically_inside(const char *base, const char *rel, const char *root) {
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_add(&b, base, strcmp(base, "/") ? strlen(base) : 0);
  for (const char *s = rel; *s;) {
    size_t n = strcspn(s, "/");
    if (n == 2 && s[0] == '.' && s[1] == '.') {
      while (b.len && b.data[--b.len] != '/')
        ;
    } else if (n && !(n == 1 && s[0] == '.')) {
      ob_buf_addc(&b, '/');
      ob_buf_add(&b, s, n);
    }
    s += n + (s[n] == '/');
  }
  ob_buf_addc(&b, '/');
  b.data[b.len] = '\0';
  int in = !strncmp(b.data, root, strlen(root));
  ob_buf_free(&b);
  return in;
}

/* The real path of path's deepest existing folder (path itself when it
 * exists), or NULL. */
static char *deepest_real(const char *path) {
  char *real = realpath(path, NULL);
  if (real)
    return real;
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_add(&b, path, strlen(path));
  while (!real) {
    while (b.len > 1 && b.data[b.len - 1] == '/')
      b.len--;
    while (b.len && b.data[b.len - 1] != '/')
      b.len--;
    if (!b.len) { /* a relative path: the current directory */
      real = realpath(".", NULL);
      break;
    }
    b.data[b.len] = '\0';
    real = realpath(b.data, NULL);
  }
  ob_buf_free(&b);
  return real;
}

/* The confinement of ob_plan_read_delegate: OB_OK with *real the file's real
 * path (malloc'd), or NULL with err when the file is missing inside the root;
 * OB_EINVAL with err when it is outside (or the root does not resolve). */
static int confine(const ob_call *c, const char *root, char **realp, ob_error *err) {
  *realp = NULL;
  const ob_value *dv = c->raw && ob_typeof(c->raw) == OB_OBJECT ? field(c->raw, "_delegate")
                                                                  : NULL;
  const char *written = dv && ob_typeof(dv) == OB_STRING ? ob_string_ptr(dv) : c->delegate;
  char *real_root = ob_plans_root(root, err);
  if (!real_root)
    return OB_EINVAL;
  /* the root as messages show it: without its last '/' */
  size_t shown = strlen(real_root) > 1 ? strlen(real_root) - 1 : 1;
  const char *why = NULL;
  char *real = NULL;
  if (written[0] == '/') {
    why = "an absolute path (write it relative to the calling plan's folder)";
  } else {
    size_t wl = strlen(written), dl = strlen(c->delegate);
    /* the calling plan's folder: what read_call put before the path */
    char *folder = dl > wl && c->delegate[dl - wl - 1] == '/'
                       ? ob_xstrndup(c->delegate, dl - wl - 1 ? dl - wl - 1 : 1)
                       : ob_xstrdup(".");
    char *base = realpath(folder, NULL);
    free(folder);
    int dots = 0;
    for (const char *s = written; *s; s += strcspn(s, "/"), s += *s == '/')
      dots |= s[0] == '.' && s[1] == '.' && (s[2] == '/' || !s[2]);
    if (dots && base && !lexically_inside(base, written, real_root))
      why = "its \"..\" leads out of it";
    free(base);
  }
  if (!why) {
    int exists = (real = realpath(c->delegate, NULL)) != NULL;
    int e = errno;
    if (!exists)
      real = deepest_real(c->delegate);
    if (!real || !inside_root(real, real_root)) {
      why = "its real path is not inside it (symbolic links are followed)";
    } else if (!exists) { /* a missing file inside the root: as reading it says */
      ob_error_set(err, OB_EIO, 0, "_delegate: %s: %s", c->delegate, strerror(e));
      free(real);
      real = NULL;
    }
  }
  if (why) {
    ob_error_set(err, OB_EINVAL, 0, "_delegate \"%s\" is outside the plans root %.*s: %s",
                 written, (int)shown, real_root, why);
    free(real);
    real = NULL;
  }
  free(real_root);
  if (why)
    return OB_EINVAL;
  *realp = real;
  return OB_OK;
}

int ob_plan_confine_delegate(const ob_call *c, const char *root, ob_error *err) {
  char *real;
  int rc = confine(c, root, &real, err);
  free(real);
  return rc;
}

ob_value *ob_plan_read_delegate(const ob_call *c, const char *root, ob_error *err) {
  char *real;
  if (confine(c, root, &real, err) != OB_OK || !real)
    return NULL;
  /* read where the check looked, named as the plan names it */
  ob_buf b;
  ob_buf_init(&b);
  ob_error rerr;
  ob_value *v = NULL;
  if (ob_read_regular_file(real, &b, &rerr) != OB_OK) { /* a FIFO would hang */
    const char *what = rerr.msg + (strncmp(rerr.msg, real, strlen(real)) ? 0 : strlen(real));
    ob_error_set(err, OB_EIO, 0, "_delegate: %s%s%s", c->delegate, what == rerr.msg ? ": " : "",
                 what);
  } else if (!(v = ob_json_parse(b.data, b.len, &rerr))) {
    /* jansson's "near '<text>'" would quote the file: a plan or not */
    char *near = strstr(rerr.msg, " near ");
    if (near)
      *near = '\0';
    ob_error_set(err, rerr.code, rerr.pos, "_delegate: %s: %s", c->delegate, rerr.msg);
  }
  ob_buf_free(&b);
  free(real);
  return v;
}

/* --- checking calls against their tools --------------------------------- */

/* The object the schema judges: the call without meta-properties, except
 * those the schema's "properties" names. */
static ob_value *schema_view(const ob_value *raw, const ob_value *schema) {
  ob_value *props = ob_typeof(schema) == OB_OBJECT ? field(schema, "properties") : NULL;
  ob_value *o = ob_object(), *k, *v;
  ob_object_iter it;
  ob_object_iter_init(&it, raw);
  while (ob_object_iter_next(&it, &k, &v)) {
    if (ob_string_ptr(k)[0] == '_' &&
        !(props && ob_typeof(props) == OB_OBJECT &&
          ob_object_get(props, ob_string_ptr(k), ob_string_len(k))))
      continue;
    o = ob_object_setv(o, k, ob_ref(v));
  }
  return o;
}

/* Is `a` the pointer `b` or inside it? */
static int pointer_within(const char *a, const char *b) {
  size_t n = strlen(b);
  return !strncmp(a, b, n) && (a[n] == '\0' || a[n] == '/');
}

/* Keywords whose verdict on a container does not depend on its values. */
static int shape_keyword(const char *kw) {
  static const char *const shape[] = {"required", "additionalProperties", "propertyNames",
                                      "minProperties", "maxProperties", "minItems", "maxItems",
                                      "type"};
  return is_one_of(kw, shape, sizeof shape / sizeof *shape);
}

/* A failure counts unless a reference (not yet resolved) could explain it:
 * it is at or inside a reference, or above one and about values. */
static int failure_counts(const ob_call *c, const ob_schema_failure *f) {
  for (size_t k = 0; k < c->neach_at; k++)
    if (pointer_within(c->each_at[k], f->instance_path) ||
        pointer_within(f->instance_path, c->each_at[k]))
      return 0; /* the copies are judged, with their element there */
  for (size_t r = 0; r < c->nrefs; r++) {
    if (pointer_within(c->refs[r].pointer, f->instance_path) && !shape_keyword(f->keyword))
      return 0;
    if (pointer_within(f->instance_path, c->refs[r].pointer))
      return 0;
  }
  return 1;
}

static void check_tools(ob_plan *p, const ob_map *tools, int has_latent_handler, ob_map *seen);

/* A delegated plan is checked once (by file), with everything it delegates to,
 * confined to the caller's plans root (which it keeps): a plan that delegates
 * to itself is fine here; its depth is a run-time limit. */
static void check_delegate(ob_plan *p, ob_call *c, const ob_map *tools, int latent, ob_map *seen) {
  if (ob_map_get(seen, c->delegate, strlen(c->delegate)))
    return;
  ob_map_put(seen, c->delegate, strlen(c->delegate), c);
  ob_error err;
  ob_value *v = ob_plan_read_delegate(c, p->root, &err);
  if (!v) {
    ob_plan_error(p, c, "%s", err.msg);
    return;
  }
  /* a probe: every check gives the answer the whole plan would, without copying
   * its instanced calls (instances x calls can be millions; a run counts them) */
  ob_plan *sub = ob_plan_probe(v, c->delegate);
  ob_unref(v);
  sub->root = p->root ? ob_xstrdup(p->root) : NULL;
  check_tools(sub, tools, latent, seen);
  for (size_t i = 0; i < sub->nerrors; i++)
    ob_plan_error(p, c, "in the delegated plan: %s", sub->errors[i]);
  ob_plan_free(sub);
}

size_t ob_plan_check_tools(ob_plan *p, const ob_map *tools, int has_latent_handler) {
  size_t before = p->nerrors;
  ob_map seen;
  ob_map_init(&seen);
  ob_map_put(&seen, p->file, strlen(p->file), p);
  check_tools(p, tools, has_latent_handler, &seen);
  ob_map_free(&seen);
  return p->nerrors - before;
}

/* No tool has c's name: the nearest loaded one is offered, else the first few loaded,
 * or, when none is, the option that loads them. */
static void missing_tool(ob_plan *p, const ob_call *c, const ob_map *tools) {
  if (!tools->n) {
    ob_plan_error(p, c, "no tool named \"%s\" is loaded (use --tools PATH)", c->tool_name);
    return;
  }
  ob_suggester s;
  ob_suggester_init(&s, c->tool_name);
  size_t i = 0;
  ob_map_entry *e;
  while (ob_map_next(tools, &i, &e))
    ob_suggester_add(&s, e->key);
  const char *near = ob_suggester_best(&s);
  if (near) {
    ob_plan_error(p, c, "no tool named \"%s\" is loaded (did you mean \"%s\"?)", c->tool_name,
                  near);
    return;
  }
  ob_buf b; /* the first few loaded, in the order they were */
  ob_buf_init(&b);
  for (i = 0; ob_map_next(tools, &i, &e) && i <= 8;)
    ob_buf_addf(&b, "%s%.60s", i > 1 ? ", " : "", e->key);
  ob_plan_error(p, c, "no tool named \"%s\" is loaded (loaded: %s%s)", c->tool_name, b.data,
                tools->n > 8 ? ", ..." : "");
  ob_buf_free(&b);
}

static void check_tools(ob_plan *p, const ob_map *tools, int has_latent_handler, ob_map *seen) {
  ob_toolname_resolver names; /* a model may name a tool by its API name (ob_toolname.h) */
  ob_toolname_resolver_init(&names, tools);
  for (size_t i = 0; i < p->ncalls; i++) {
    ob_call *c = &p->calls[i];
    if (c->delegate && !p->quiet) {
      check_delegate(p, c, tools, has_latent_handler, seen);
      continue;
    }
    if (ob_typeof(c->raw) != OB_OBJECT || !strcmp(c->tool_name, "?") || c->delegate)
      continue;
    const ob_tool *t = ob_toolname_resolve(&names, c->tool_name, strlen(c->tool_name));
    if (!t) {
      missing_tool(p, c, tools);
      continue;
    }
    c->tool = t;
    c->tool_name = t->name; /* the tool's real name, whichever name the call gave */
    ob_value *clean = ob_nulls_params(t, c->raw); /* null optional params are absent */
    if (clean) {
      ob_unref(c->raw);
      c->raw = clean;
    }
    if (t->latent && !has_latent_handler)
      ob_plan_error(p, c, "\"%s\" is a latent tool (it has no run function) and no latent "
                          "handler is set", t->name);
    if (!t->schema)
      continue;
    ob_value *view = schema_view(c->raw, t->schema_value);
    ob_schema_result res = {0};
    ob_schema_validate(t->schema, view, &res);
    for (size_t f = 0; f < res.n; f++) {
      ob_schema_failure *fl = &res.fail[f];
      if (!strncmp(fl->instance_path, "/_outputPath", 12)) {
        ob_plan_error(p, c, "_outputPath does not satisfy the tool's schema: %s: %s",
                      fl->keyword, fl->message);
      } else if (failure_counts(c, fl) && fl->instance_path[0]) {
        ob_plan_error(p, c, "parameter \"%s\" does not satisfy the tool's schema: %s: %s",
                      fl->instance_path + 1, fl->keyword, fl->message);
      } else if (failure_counts(c, fl)) {
        ob_plan_error(p, c, "params do not satisfy the tool's schema: %s: %s", fl->keyword,
                      fl->message);
      }
    }
    ob_schema_result_free(&res);
    ob_unref(view);
  }
  ob_toolname_resolver_free(&names);
}

char *ob_plan_part_text(const ob_value *v, const ob_plan *p, size_t from, size_t to, size_t *len,
                        ob_value **list) {
  ob_value *inst = ob_array();
  for (size_t i = from; i < to; i++)
    inst = ob_array_push(inst, ob_cstring(p->instances[i]));
  /* v itself is kept: a set on a shared object copies it (ob_value.h) */
  ob_value *copy = ob_object_set(ob_ref((ob_value *)v), "instances", 9, ob_ref(inst));
  char *text = ob_json_print(copy, OB_JSON_COMPACT, len);
  ob_unref(copy);
  if (list)
    *list = inst;
  else
    ob_unref(inst);
  return text;
}
