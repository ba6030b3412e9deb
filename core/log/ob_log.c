/* ob_log.c -- the append-only message log and the documents it composes.
 * plan-format §1 (message forms), 2 (resolution), 4 (methods), 6 (instance views).
 *
 * Design
 * ------
 * The log is an array of read messages (ob_msg). Beside it, a hash table maps
 * each (kind, scope) to its document's history: the list of (position, root)
 * versions, one per message that wrote it. Roots are persistent values
 * (ob_value.c), so consecutive versions share everything but the written
 * path, and every version stays readable.
 *
 * Costs, for a log of M messages over documents of depth d:
 *   append         O(d * log32 w) to copy the written path (w: widest object
 *                  on it), plus O(1) amortised to record the version;
 *   read now       O(1) to find the document, O(d * log32 w) to walk it;
 *   read as of N   adds a binary search over that document's versions:
 *                  O(log M). Nothing ever scans the log.
 * Memory grows by about one path copy a message: the price of time travel.
 *
 * Instance scopes (plan-format §6): an instance reads its view, the global document
 * deep-merged with its own, instance winning. The view is never built whole:
 * a read walks both documents side by side and merges only at the end, when
 * two objects meet at the path. An instance write stores, in the instance's
 * own document, the value computed from the view (copy-on-write): the first
 * array or scalar met on the path, or else the value at the path itself;
 * except a merge into objects all the way down, which the instance keeps as
 * it is (its own part only), so the global document still shows through.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/ob_map.h"
#include "base/ob_mem.h"
#include "log/ob_log.h"
#include "log/ob_msg.h"

typedef struct version {
  size_t pos; /* the message that made this version */
  ob_value *root;
} version;

typedef struct history {
  size_t n, cap;
  version *v;
} history;

typedef struct doc {
  ob_value *kind, *instance; /* instance NULL: global */
  const char *shared;        /* the kind's shared copy (ob_kind_shared), or NULL */
  uint32_t hash;
  history roots, schemas;
} doc;

struct ob_log {
  int keep_history; /* keep every version (time travel); else only the newest */
  size_t nschemas;  /* messages that carried a schema: none means no document has one */
  size_t nmsg, capmsg;
  ob_msg *msg;
  size_t ndocs, capdocs; /* open addressing, capdocs a power of two */
  doc **docs;
  doc *last_global; /* the global document found last: most reads and writes of a run
                       are of one kind ("state"), found again with one compare */
};

ob_log *ob_log_new(void) {
  ob_log *log = calloc(1, sizeof *log);
  if (!log)
    abort();
  log->keep_history = 1;
  log->capdocs = 16;
  log->docs = calloc(log->capdocs, sizeof *log->docs);
  if (!log->docs)
    abort();
  return log;
}

static void history_free(history *h) {
  for (size_t i = 0; i < h->n; i++)
    ob_unref(h->v[i].root);
  ob_mem_free(h->v);
}

_Static_assert(sizeof(ob_msg) == 64, "a log message is one cache line");

static void msg_free(ob_msg *m) {
  ob_unref(m->raw);
  ob_unref(m->kind);
  ob_unref(m->instance);
  ob_unref(m->path);
  ob_unref(m->value);
  ob_unref(m->call);
  ob_unref(m->sublog);
}

void ob_log_free(ob_log *log) {
  if (!log)
    return;
  for (size_t i = 0; i < log->nmsg; i++)
    msg_free(&log->msg[i]);
  ob_mem_free(log->msg);
  for (size_t i = 0; i < log->capdocs; i++) {
    doc *d = log->docs[i];
    if (!d)
      continue;
    history_free(&d->roots);
    history_free(&d->schemas);
    ob_unref(d->kind);
    ob_unref(d->instance);
    free(d);
  }
  free(log->docs);
  free(log);
}

size_t ob_log_len(const ob_log *log) { return log->nmsg; }

void ob_log_keep_history(ob_log *log, int keep) { log->keep_history = keep; }

void ob_log_reserve(ob_log *log, size_t n) {
  if (n > log->capmsg) {
    log->capmsg = n;
    log->msg = ob_mem_realloc(log->msg, log->capmsg * sizeof *log->msg);
  }
}

const ob_msg *ob_log_at(const ob_log *log, size_t i) { return &log->msg[i]; }

/* --- the document table ------------------------------------------------ */

static uint32_t mix(uint32_t h, const char *s, size_t n) {
  for (size_t i = 0; i < n; i++) {
    h ^= (unsigned char)s[i];
    h *= 16777619u;
  }
  return h;
}

static uint32_t doc_hash(const char *kind, size_t klen, const char *inst, size_t ilen) {
  uint32_t h = mix(2166136261u, kind, klen);
  return inst ? mix(h ^ 0xff, inst, ilen) * 31u + 1u : h;
}

static int str_is(const ob_value *s, const char *p, size_t n) {
  return ob_string_len(s) == n && memcmp(ob_string_ptr(s), p, n) == 0;
}

static doc **doc_slot(ob_log *log, const char *kind, const char *inst, uint32_t h) {
  size_t klen = strlen(kind), ilen = inst ? strlen(inst) : 0;
  size_t mask = log->capdocs - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    doc *d = log->docs[i];
    if (!d)
      return &log->docs[i];
    if (d->hash == h && str_is(d->kind, kind, klen) &&
        (inst ? d->instance && str_is(d->instance, inst, ilen) : !d->instance))
      return &log->docs[i];
  }
}

/* a and b are equal C strings (kind names are short: a byte loop costs less
 * than strcmp's setup) */
static int same_name(const char *a, const char *b) {
  while (*a && *a == *b)
    a++, b++;
  return *a == *b;
}

static doc *doc_find(ob_log *log, const char *kind, const char *inst) {
  doc *last = log->last_global;
  if (!inst && last && (kind == last->shared || same_name(ob_string_ptr(last->kind), kind)))
    return last;
  uint32_t h = doc_hash(kind, strlen(kind), inst, inst ? strlen(inst) : 0);
  doc *d = *doc_slot(log, kind, inst, h);
  if (d && !inst)
    log->last_global = d;
  return d;
}

static doc *doc_get(ob_log *log, ob_value *kind, ob_value *inst) {
  doc *last = log->last_global;
  if (!inst && last && (last->kind == kind || ob_identical(last->kind, kind)))
    return last;
  const char *k = ob_string_ptr(kind), *i = inst ? ob_string_ptr(inst) : NULL;
  uint32_t h = doc_hash(k, ob_string_len(kind), i, inst ? ob_string_len(inst) : 0);
  doc **slot = doc_slot(log, k, i, h);
  if (*slot)
    return *slot;
  if (2 * (log->ndocs + 1) > log->capdocs) { /* keep the table at most half full */
    doc **old = log->docs;
    size_t oldcap = log->capdocs;
    log->capdocs *= 2;
    log->docs = calloc(log->capdocs, sizeof *log->docs);
    if (!log->docs)
      abort();
    for (size_t j = 0; j < oldcap; j++) {
      if (!old[j])
        continue;
      size_t mask = log->capdocs - 1, at = old[j]->hash & mask;
      while (log->docs[at])
        at = (at + 1) & mask;
      log->docs[at] = old[j];
    }
    free(old);
    slot = doc_slot(log, k, i, h);
  }
  doc *d = calloc(1, sizeof *d);
  if (!d)
    abort();
  d->kind = ob_ref(kind);
  d->shared = ob_kind_shared(k, ob_string_len(kind));
  d->instance = ob_ref(inst);
  d->hash = h;
  *slot = d;
  log->ndocs++;
  return d;
}

/* The newest version made by one of the first `at` messages, or NULL. */
static ob_value *history_at(const history *h, size_t at) {
  if (!h || !h->n)
    return NULL;
  if (at == OB_LOG_NOW || h->v[h->n - 1].pos < at)
    return h->v[h->n - 1].root;
  size_t lo = 0, hi = h->n; /* first version with pos >= at */
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (h->v[mid].pos < at)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo ? h->v[lo - 1].root : NULL;
}

static void history_push(history *h, size_t pos, ob_value *root, int keep) {
  if (!keep && h->n) { /* only the newest version is kept */
    ob_unref(h->v[0].root);
    h->v[0].pos = pos;
    h->v[0].root = root;
    return;
  }
  if (h->n == h->cap) {
    h->cap = h->cap ? h->cap * 2 : 4;
    h->v = ob_mem_realloc(h->v, h->cap * sizeof *h->v);
  }
  h->v[h->n].pos = pos;
  h->v[h->n].root = root;
  h->n++;
}

static ob_value *doc_root(ob_log *log, const char *kind, const char *inst, size_t at) {
  doc *d = doc_find(log, kind, inst);
  return d ? history_at(&d->roots, at) : NULL;
}

/* --- reading through an instance's view -------------------------------- */

/* The value at the first n segments of p in the view merge(g, i). */
static ob_value *view_get(const ob_value *g, const ob_value *i, const ob_path *p, size_t n) {
  for (size_t s = 0; s < n; s++) {
    if (!i) { /* the instance has nothing here: the rest is the global's */
      ob_path rest = {n - s, p->segs + s};
      return ob_ref(ob_doc_get(g, &rest, rest.n));
    }
    int both_objects = g && ob_typeof(g) == OB_OBJECT && ob_typeof(i) == OB_OBJECT;
    ob_path one = {1, &p->segs[s]};
    i = ob_doc_get(i, &one, 1);
    g = both_objects ? ob_doc_get(g, &one, 1) : NULL;
    if (!i && !g)
      return NULL;
  }
  if (!i)
    return ob_ref((ob_value *)g);
  if (!g)
    return ob_ref((ob_value *)i);
  return ob_doc_merge(g, i);
}

ob_value *ob_log_read(ob_log *log, const char *kind, const char *instance, const ob_path *p,
                      size_t at) {
  if (!log->keep_history && at < log->nmsg)
    return NULL; /* the old versions were not kept */
  ob_value *g = doc_root(log, kind, NULL, at);
  if (!instance)
    return ob_ref(ob_doc_get(g, p, p->n));
  return view_get(g, doc_root(log, kind, instance, at), p, p->n);
}

void ob_log_prefetch_write(ob_log *log, const char *kind, const char *instance,
                           const ob_path *p, int levels) {
  if (instance || !p->n)
    return; /* an instance's writes go through its view: not worth guessing */
  doc *d = doc_find(log, kind, NULL);
  if (!d || !d->roots.n)
    return;
  ob_path parent = {p->n - 1, p->segs};
  const ob_value *o = ob_doc_get(history_at(&d->roots, OB_LOG_NOW), &parent, parent.n);
  if (o)
    ob_prefetch_key(o, ob_seg_hash(&p->segs[p->n - 1]), levels);
}

ob_value *ob_log_eval(ob_log *log, const ob_expr *e, const char *instance, size_t at) {
  for (size_t a = 0; a < e->n; a++) {
    const ob_alt *alt = &e->alts[a];
    ob_value *v = NULL;
    for (size_t r = 0; r < alt->n; r++) {
      ob_unref(v);
      v = ob_log_read(log, alt->refs[r].kind, instance, &alt->refs[r].path, at);
      if (!v)
        break;
    }
    if (v)
      return v;
  }
  return NULL;
}

ob_value *ob_log_schema(ob_log *log, const char *kind, const char *instance, size_t at) {
  doc *d;
  ob_value *s = NULL;
  if (!log->nschemas)
    return NULL;
  if (instance && (d = doc_find(log, kind, instance)))
    s = history_at(&d->schemas, at);
  if (!s && (d = doc_find(log, kind, NULL)))
    s = history_at(&d->schemas, at);
  return s;
}

/* --- writing ------------------------------------------------------------- */

/* What a write makes of its document: the new root of the target document
 * (global, or the instance's own) in *next, or NULL with err filled. */
static doc *compute_write(ob_log *log, ob_value *kind, ob_value *instance, const ob_path *p,
                          ob_method method, const ob_value *value, ob_value **next,
                          ob_error *err) {
  doc *g = doc_get(log, kind, NULL);
  ob_value *groot = history_at(&g->roots, OB_LOG_NOW);
  if (!instance) {
    *next = ob_doc_write(groot, p, method, value, err);
    return g;
  }
  doc *target = doc_get(log, kind, instance);
  ob_value *iroot = history_at(&target->roots, OB_LOG_NOW);
  /* copy-on-write stops at the first array or scalar the view shows on the path */
  size_t q = 0;
  ob_value *vq = view_get(groot, iroot, p, 0);
  while (q < p->n && (!vq || ob_typeof(vq) == OB_OBJECT)) {
    ob_unref(vq);
    vq = view_get(groot, iroot, p, ++q);
  }
  ob_value *own = q == p->n ? ob_doc_get(iroot, p, p->n) : NULL;
  if (q == p->n && method == OB_METHOD_MERGE && (!vq || ob_typeof(vq) == OB_OBJECT) &&
      (!own || ob_typeof(own) == OB_OBJECT)) {
    /* merging into objects all the way: the instance keeps only what it
     * adds, and the global document keeps showing through (later global
     * writes included), as merge(global, merge(own, value)) is the view */
    ob_unref(vq);
    *next = ob_doc_write(iroot, p, OB_METHOD_MERGE, value, err);
    return target;
  }
  ob_value *sub = ob_doc_write_from(vq, p, q, method, value, err);
  ob_unref(vq);
  *next = NULL;
  if (sub) {
    ob_path prefix = {q, p->segs};
    *next = ob_doc_write(iroot, &prefix, OB_METHOD_SET, sub, err);
    ob_unref(sub);
  }
  return target;
}

/* Applies m's write (at path p) to its document; on success records the new version. */
static int apply_write(ob_log *log, const ob_msg *m, const ob_path *p, size_t pos, ob_error *err) {
  ob_value *schema = ob_msg_schema(m);
  if (!log->keep_history && !m->instance) {
    /* nobody can ask for the old version: write into it, in place where unshared */
    doc *g = doc_get(log, m->kind, NULL);
    ob_value *root = g->roots.n ? g->roots.v[0].root : NULL;
    int rc = ob_doc_write_take(&root, p, 0, m->method, m->value, err);
    if (g->roots.n) /* even after an error: a shared root comes back as an equal copy */
      g->roots.v[0].root = root;
    if (rc != OB_OK)
      return rc;
    if (g->roots.n)
      g->roots.v[0].pos = pos;
    else
      history_push(&g->roots, pos, root, 0);
    if (schema) {
      history_push(&g->schemas, pos, ob_ref(schema), 0);
      log->nschemas++;
    }
    return OB_OK;
  }
  ob_value *next;
  doc *target = compute_write(log, m->kind, m->instance, p, m->method, m->value, &next, err);
  if (!next)
    return err ? err->code : OB_EWRITE;
  history_push(&target->roots, pos, next, log->keep_history);
  if (schema) {
    history_push(&target->schemas, pos, ob_ref(schema), log->keep_history);
    log->nschemas++;
  }
  return OB_OK;
}

ob_value *ob_log_preview(ob_log *log, const char *kind, const char *instance, const ob_path *p,
                         ob_method method, const ob_value *value, ob_error *err) {
  ob_value *k = ob_cstring(kind), *inst = instance ? ob_cstring(instance) : NULL, *next;
  compute_write(log, k, inst, p, method, value, &next, err);
  if (next && instance) { /* the instance's view after the write */
    ob_value *view = ob_doc_merge(doc_root(log, kind, NULL, OB_LOG_NOW), next);
    ob_unref(next);
    next = view;
  }
  ob_unref(k);
  ob_unref(inst);
  return next;
}

static long commit(ob_log *log, ob_msg *m, const ob_path *p, ob_error *err) {
  size_t pos = log->nmsg;
  if (m->type != OB_MSG_OTHER) {
    int rc = apply_write(log, m, p, pos, err);
    if (rc != OB_OK) {
      msg_free(m);
      return rc;
    }
  }
  if (log->nmsg == log->capmsg) {
    log->capmsg = log->capmsg ? log->capmsg * 2 : 64;
    log->msg = ob_mem_realloc(log->msg, log->capmsg * sizeof *log->msg);
  }
  log->msg[log->nmsg++] = *m;
  return (long)pos;
}

/* --- reading a message --------------------------------------------------- */

static ob_value *field(const ob_value *o, const char *name) {
  return ob_object_get(o, name, strlen(name));
}

ob_value *ob_msg_schema(const ob_msg *m) {
  return m->raw && m->type != OB_MSG_OTHER ? field(m->raw, "schema") : NULL;
}

static int valid_kind(const ob_value *k) {
  const char *s = ob_string_ptr(k);
  size_t n = ob_string_len(k);
  if (!n || !(s[0] == '_' || ((s[0] | 32) >= 'a' && (s[0] | 32) <= 'z')))
    return 0;
  for (size_t i = 1; i < n; i++) {
    char c = s[i];
    if (!(c == '_' || c == '-' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z')))
      return 0;
  }
  return 1;
}

/* The data of a message without a "data" field: its other fields. */
static ob_value *dataless(const ob_value *msg) {
  ob_value *d = ob_object(), *k, *v;
  ob_object_iter it;
  ob_object_iter_init(&it, msg);
  while (ob_object_iter_next(&it, &k, &v)) {
    const char *s = ob_string_ptr(k);
    if (s[0] == '_' || !strcmp(s, "type") || !strcmp(s, "kind") || !strcmp(s, "schema"))
      continue;
    d = ob_object_setv(d, k, ob_ref(v));
  }
  return d;
}

static int bad(ob_error *err, const char *fmt, const char *arg) {
  return ob_error_set(err, OB_EINVAL, 0, fmt, arg);
}

/* Fills m, and p with its path, from a message in any accepted form (plan-format §1). */
static int read_message(ob_value *msg, ob_msg *m, ob_path *p, ob_error *err) {
  memset(m, 0, sizeof *m);
  memset(p, 0, sizeof *p);
  if (ob_typeof(msg) != OB_OBJECT)
    return bad(err, "a message must be a JSON object, not %s", ob_type_name(ob_typeof(msg)));
  ob_value *type = field(msg, "type"), *kind = field(msg, "kind");
  ob_value *inst = field(msg, "_instance"), *data = field(msg, "data");
  ob_value *call = field(msg, "_call"), *path = field(msg, "_path");
  ob_value *method = field(msg, "_outputMethod");
  if (type && ob_typeof(type) != OB_STRING)
    return bad(err, "\"type\" must be a string%s", "");
  if (kind && ob_typeof(kind) != OB_STRING)
    return bad(err, "\"kind\" must be a string%s", "");
  if (inst && ob_typeof(inst) != OB_STRING)
    return bad(err, "\"_instance\" must be a string%s", "");
  /* a NUL would cut the C text short: instance "a\0b" taken as a, kind "st\0ate" named st */
  if (inst && memchr(ob_string_ptr(inst), '\0', ob_string_len(inst)))
    return bad(err, "\"_instance\" holds a NUL byte (\\u0000)%s", "");
  m->raw = ob_ref(msg);
  if (type && str_is(type, "plan", 4)) {
    m->type = OB_MSG_OTHER;
    return OB_OK;
  }
  if (type && !str_is(type, "data", 4)) { /* shorthand: the type names the kind */
    if (kind && !ob_equal(kind, type))
      return bad(err, "\"kind\" disagrees with the shorthand \"type\": \"%s\"", ob_string_ptr(type));
    kind = type;
  }
  m->kind = kind ? ob_ref(kind) : ob_cstring("data");
  if (!valid_kind(m->kind)) {
    const char *k = ob_string_ptr(m->kind);
    size_t n = ob_string_len(m->kind);
    if (memchr(k, '\0', n))
      return bad(err, "\"kind\" holds a NUL byte (\\u0000): no kind name does%s", "");
    char *shown = ob_escape_text(k, n, 0);
    int rc = bad(err, "\"%s\" is not a kind name ([A-Za-z_][A-Za-z0-9_-]*)", shown);
    free(shown);
    return rc;
  }
  m->instance = ob_ref(inst);
  m->value = data ? ob_ref(data) : dataless(msg);
  m->type = call || path ? OB_MSG_OUTPUT : OB_MSG_CONTEXT;
  m->method = m->type == OB_MSG_OUTPUT ? OB_METHOD_SET : OB_METHOD_MERGE;
  if (method) {
    int mm = ob_typeof(method) == OB_STRING
                 ? ob_method_parse(ob_string_ptr(method), ob_string_len(method))
                 : -1;
    if (mm < 0)
      return bad(err, "\"_outputMethod\" must be one of set, merge, assign, push, concat%s", "");
    m->method = (ob_method)mm;
  }
  if (m->type == OB_MSG_CONTEXT)
    return OB_OK;
  /* an output message: its value sits in data under its path */
  ob_error perr;
  if (path) {
    if (ob_typeof(path) != OB_STRING)
      return bad(err, "\"_path\" must be a string%s", "");
    if (ob_path_parse(ob_string_ptr(path), ob_string_len(path), p, &perr) != OB_OK)
      return bad(err, "\"_path\": %s", perr.msg);
  } else {
    ob_value *op = ob_typeof(call) == OB_OBJECT ? field(call, "_outputPath") : NULL;
    ob_expr e;
    if (!op || ob_typeof(op) != OB_STRING)
      return bad(err, "an output message needs \"_path\" (its _call has no _outputPath)%s", "");
    if (ob_expr_parse(ob_string_ptr(op), ob_string_len(op), OB_EXPR_OUTPUT, &e, &perr) != OB_OK)
      return bad(err, "\"_call._outputPath\": %s", perr.msg);
    int single = e.n == 1 && e.alts[0].n == 1;
    if (single)
      ob_path_copy(p, &e.alts[0].refs[0].path);
    ob_expr_free(&e);
    if (!single)
      return bad(err, "an output message whose _outputPath is an expression needs \"_path\"%s", "");
  }
  ob_buf b;
  ob_buf_init(&b);
  ob_path_format(&b, p);
  m->path = ob_string(b.data ? b.data : "", b.len);
  ob_buf_free(&b);
  m->call = ob_ref(call);
  ob_value *v = ob_doc_get(m->value, p, p->n);
  if (!v)
    return bad(err, "an output message's data holds nothing at its path \"%s\"",
               ob_string_ptr(m->path));
  ob_value *data_whole = m->value;
  m->value = ob_ref(v);
  ob_unref(data_whole);
  return OB_OK;
}

long ob_log_append(ob_log *log, ob_value *msg, ob_error *err) {
  ob_msg m;
  ob_path p;
  long rc = read_message(msg, &m, &p, err);
  if (rc != OB_OK)
    msg_free(&m);
  else
    rc = commit(log, &m, &p, err);
  ob_path_free(&p);
  return rc;
}

void ob_log_date(int64_t when, char out[32]) {
  /* gmtime and strftime cost more than the rest: redo them once a second */
  static _Thread_local time_t last_sec = -1;
  static _Thread_local char last[24];
  time_t sec = (time_t)(when / 1000);
  if (sec != last_sec) {
    struct tm tm;
    gmtime_r(&sec, &tm);
    strftime(last, sizeof last, "%Y-%m-%dT%H:%M:%S", &tm);
    last_sec = sec;
  }
  int ms = (int)(when % 1000);
  size_t n = strlen(last);
  memcpy(out, last, n);
  out[n] = '.';
  out[n + 1] = (char)('0' + ms / 100);
  out[n + 2] = (char)('0' + ms / 10 % 10);
  out[n + 3] = (char)('0' + ms % 10);
  out[n + 4] = 'Z';
  out[n + 5] = '\0';
}

long ob_log_append_output(ob_log *log, const char *kind, const char *instance,
                          const ob_path *path, ob_method method, const ob_value *value,
                          const ob_value *call, ob_error *err) {
  return ob_log_append_output_text(log, kind, instance, path, NULL, method, value, call, err);
}

long ob_log_append_output_text(ob_log *log, const char *kind, const char *instance,
                               const ob_path *path, ob_value *path_text, ob_method method,
                               const ob_value *value, const ob_value *call, ob_error *err) {
  ob_msg m;
  memset(&m, 0, sizeof m);
  m.type = OB_MSG_OUTPUT;
  m.method = method;
  m.value = ob_ref((ob_value *)value);
  m.call = ob_ref((ob_value *)call);
  /* reuse the document's own kind and instance strings: no copies a message */
  doc *d = doc_find(log, kind, instance);
  m.kind = d ? ob_ref(d->kind) : ob_cstring(kind);
  m.instance = !instance ? NULL : d ? ob_ref(d->instance) : ob_cstring(instance);
  if (path_text) {
    m.path = ob_ref(path_text);
  } else {
    ob_buf b;
    ob_buf_init(&b);
    ob_path_format(&b, path);
    m.path = ob_string(b.data ? b.data : "", b.len);
    ob_buf_free(&b);
  }
  struct timespec ts; /* the date is printed only if the message is ever materialised */
  clock_gettime(CLOCK_REALTIME, &ts);
  m.date_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000L;
  return commit(log, &m, path, err);
}

ob_value *ob_log_message(const ob_log *log, size_t i) {
  const ob_msg *m = &log->msg[i];
  if (m->raw)
    return ob_ref(m->raw);
  ob_path p;
  ob_error err;
  if (ob_path_parse(ob_string_ptr(m->path), ob_string_len(m->path), &p, &err) != OB_OK)
    abort(); /* the text was made by ob_path_format: it always parses */
  ob_value *raw = ob_msg_data(ob_ref(m->kind), ob_doc_nest(&p, m->value),
                              m->instance ? ob_ref(m->instance) : NULL);
  raw = ob_object_set(raw, "_path", 5, ob_ref(m->path));
  raw = ob_object_set(raw, "_outputMethod", 13, ob_cstring(ob_method_name(m->method)));
  if (m->call)
    raw = ob_object_set(raw, "_call", 5, ob_ref(m->call));
  char date[32];
  ob_log_date(m->date_ms, date);
  raw = ob_object_set(raw, "_date", 5, ob_cstring(date));
  if (m->sublog)
    raw = ob_object_set(raw, "_log", 4, ob_ref(m->sublog));
  ob_path_free(&p);
  return raw;
}

/* ,"key": -- the keys here are plain names, with nothing to escape */
static void add_key(ob_buf *b, const char *key, size_t len) {
  ob_buf_reserve(b, len + 4);
  char *p = b->data + b->len;
  p[0] = ',';
  p[1] = '"';
  memcpy(p + 2, key, len);
  p[len + 2] = '"';
  p[len + 3] = ':';
  b->len += len + 4;
  b->data[b->len] = '\0';
}

/* A string with nothing to escape (a method's name, a date), quoted. */
static void add_plain(ob_buf *b, const char *s) {
  size_t n = strlen(s);
  ob_buf_reserve(b, n + 2);
  char *p = b->data + b->len;
  p[0] = '"';
  memcpy(p + 1, s, n);
  p[n + 1] = '"';
  b->len += n + 2;
  b->data[b->len] = '\0';
}

/* A path's text is one plain key when it has none of the characters that
 * separate, bracket or quote segments (ob_path_format writes those). */
static int one_plain_key(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (s[i] == '.' || s[i] == '[' || s[i] == ']' || s[i] == '"' || s[i] == '\\')
      return 0;
  return n > 0;
}

void ob_log_message_write(const ob_log *log, size_t i, ob_buf *b) {
  const ob_msg *m = &log->msg[i];
  if (m->raw) {
    ob_json_write(b, m->raw, OB_JSON_COMPACT);
    return;
  }
  /* as ob_log_message builds it, member for member, without building it */
  static const char head[] = "{\"type\":\"data\",\"kind\":";
  ob_buf_add(b, head, sizeof head - 1);
  ob_json_write(b, m->kind, OB_JSON_COMPACT);
  if (m->instance) {
    add_key(b, "_instance", 9);
    ob_json_write(b, m->instance, OB_JSON_COMPACT);
  }
  add_key(b, "data", 4);
  const char *pt = ob_string_ptr(m->path);
  size_t pn = ob_string_len(m->path), depth = 0;
  ob_path p = {0, NULL};
  if (one_plain_key(pt, pn)) { /* the common case: no parse, no allocation */
    ob_buf_addc(b, '{');
    ob_json_write_string(b, pt, pn);
    ob_buf_addc(b, ':');
    depth = 1;
  } else {
    ob_error err;
    if (ob_path_parse(pt, pn, &p, &err) != OB_OK)
      abort(); /* the text was made by ob_path_format: it always parses */
    for (; depth < p.n; depth++) {
      ob_buf_addc(b, '{');
      ob_json_write_string(b, p.segs[depth].key, p.segs[depth].keylen);
      ob_buf_addc(b, ':');
    }
    ob_path_free(&p);
  }
  ob_json_write(b, m->value, OB_JSON_COMPACT);
  while (depth--)
    ob_buf_addc(b, '}');
  add_key(b, "_path", 5);
  ob_json_write_string(b, pt, pn);
  add_key(b, "_outputMethod", 13);
  add_plain(b, ob_method_name(m->method));
  if (m->call) {
    add_key(b, "_call", 5);
    ob_json_write(b, m->call, OB_JSON_COMPACT);
  }
  char date[32];
  ob_log_date(m->date_ms, date);
  add_key(b, "_date", 5);
  add_plain(b, date);
  if (m->sublog) {
    add_key(b, "_log", 4);
    ob_json_write(b, m->sublog, OB_JSON_COMPACT);
  }
  ob_buf_addc(b, '}');
}

void ob_log_attach(ob_log *log, size_t pos, const ob_value *sublog) {
  ob_msg *m = &log->msg[pos];
  ob_unref(m->sublog);
  m->sublog = ob_ref((ob_value *)sublog);
}

/* --- the documents as of a point (`obelus log --at N`, the UI's state) ------------- */

/* Adds s (an OB_STRING) to the list when it is new: first appearance order. */
static void add_name(ob_map *seen, ob_value **list, const ob_value *s) {
  if (!s || ob_map_get(seen, ob_string_ptr(s), ob_string_len(s)))
    return;
  ob_map_put(seen, ob_string_ptr(s), ob_string_len(s), (void *)s);
  *list = ob_array_push(*list, ob_ref((ob_value *)s));
}

ob_value *ob_log_documents(ob_log *log, size_t at) {
  ob_map seen_k, seen_i;
  ob_map_init(&seen_k);
  ob_map_init(&seen_i);
  ob_value *kinds = ob_array(), *insts = ob_array();
  for (size_t i = 0; i < at; i++) {
    const ob_msg *m = ob_log_at(log, i);
    add_name(&seen_k, &kinds, m->kind);
    add_name(&seen_i, &insts, m->instance);
  }
  ob_map_free(&seen_k);
  ob_map_free(&seen_i);
  ob_path root = {0, NULL};
  ob_value *docs = ob_object();
  for (size_t k = 0; k < ob_array_len(kinds); k++) {
    const ob_value *kind = ob_array_get(kinds, k);
    ob_value *d = ob_log_read(log, ob_string_ptr(kind), NULL, &root, at);
    if (d)
      docs = ob_object_setv(docs, (ob_value *)kind, d);
  }
  ob_value *out = ob_object_set(ob_object(), "at", 2, ob_int((int64_t)at));
  out = ob_object_set(out, "documents", 9, docs);
  if (ob_array_len(insts)) {
    ob_value *views = ob_object();
    for (size_t x = 0; x < ob_array_len(insts); x++) {
      const ob_value *inst = ob_array_get(insts, x);
      ob_value *seen = ob_object();
      for (size_t k = 0; k < ob_array_len(kinds); k++) {
        const ob_value *kind = ob_array_get(kinds, k);
        ob_value *d = ob_log_read(log, ob_string_ptr(kind), ob_string_ptr(inst), &root, at);
        if (d)
          seen = ob_object_setv(seen, (ob_value *)kind, d);
      }
      views = ob_object_setv(views, (ob_value *)inst, seen);
    }
    out = ob_object_set(out, "instances", 9, views);
  }
  ob_unref(kinds);
  ob_unref(insts);
  return out;
}
