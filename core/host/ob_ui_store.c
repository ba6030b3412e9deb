/* ob_ui_store.c -- the runs `obelus ui` has read.
 *
 * The list needs each journal's summary; the page needs a run whole, or light, and one
 * call of it at a time. Reading a journal is the cost (ob_trace_build: a run of 100,000
 * calls, a 43 MB journal, in about 3 s), so each journal's summary is kept while its
 * size and time stay, and so is, for the runs asked for last, the run itself: not as
 * values (a 100,000-call run is about 380 MB of them) but as the JSON the page is sent,
 * written once: whole (39 MB), light (11 MB: what the page draws first, and what a
 * viewer of its events gets first), and where each call's JSON is in the whole, for the
 * panel's one call. The page of a run kept is then a copy of text. The runs kept stand
 * for at most `keep` bytes of journals, the newest asked kept first.
 *
 * A run's state in the summary: done or failed from its end record; else running while
 * another process holds its journal locked (ob_wal's flock), killed-resumable when
 * nobody does.
 *
 * Costs: per journal, its summary; per kept run, its text, about its journal's size,
 * and two offsets per call. Reading a run also writes its text (about a tenth of the
 * read's time). */
#include <fcntl.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "base/ob_map.h"
#include "base/ob_mem.h"
#include "host/ob_trace.h"
#include "host/ob_ui_store.h"

typedef struct entry {
  long long size, mtime_ns; /* the file as it was read */
  ob_value *summary;
  ob_ui_run run;            /* its texts (empty: not kept) */
  int kept;
  unsigned long long asked; /* when it was last asked for (the store's ticks) */
} entry;

struct ob_ui_store {
  ob_map entries; /* absolute path -> entry */
  long long keep;
  unsigned long long ticks;
};

ob_ui_store *ob_ui_store_new(long long keep) {
  ob_ui_store *s = ob_xcalloc(1, sizeof *s);
  ob_map_init(&s->entries);
  s->keep = keep;
  return s;
}

static void run_drop(entry *e) {
  ob_buf_free(&e->run.full);
  ob_buf_free(&e->run.light);
  free(e->run.at);
  memset(&e->run, 0, sizeof e->run);
  e->kept = 0;
}

void ob_ui_store_free(ob_ui_store *s) {
  if (!s)
    return;
  size_t i = 0;
  ob_map_entry *me;
  while (ob_map_next(&s->entries, &i, &me)) {
    entry *e = me->val;
    ob_unref(e->summary);
    run_drop(e);
    free(e);
  }
  ob_map_free(&s->entries);
  free(s);
}

/* --- summaries ------------------------------------------------------------------------ */

/* 1 when another process holds the journal locked: its run is going on. */
static int locked(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return 0;
  int held = flock(fd, LOCK_SH | LOCK_NB) != 0;
  close(fd);
  return held;
}

/* What the list says of a run, from its journal as the report reads it. */
static ob_value *summarize(const char *path, const ob_value *run) {
  ob_value *s = ob_object();
  const ob_value *exit = ob_object_get(run, "exit", 4), *calls = ob_object_get(run, "calls", 5);
  const ob_value *t0 = ob_object_get(run, "t0_us", 5), *dur = ob_object_get(run, "duration_us", 11);
  const char *state = exit && ob_typeof(exit) == OB_INT
                          ? (ob_int_value(exit) == 0 ? "done" : "failed")
                      : locked(path) ? "running"
                                     : "killed-resumable";
  s = ob_object_set(s, "state", 5, ob_cstring(state));
  long long start = t0 && ob_typeof(t0) == OB_INT ? ob_int_value(t0) / 1000 : 0;
  s = ob_object_set(s, "started", 7, start ? ob_int(start) : ob_null());
  s = ob_object_set(s, "ended", 5,
                    start && exit && ob_typeof(exit) == OB_INT && dur && ob_typeof(dur) == OB_INT
                        ? ob_int(start + ob_int_value(dur) / 1000)
                        : ob_null());
  size_t n = 0, failed = 0;
  for (size_t i = 0; calls && i < ob_array_len(calls); i++) {
    const ob_value *c = ob_array_get(calls, i), *scope = ob_object_get(c, "scope", 5);
    const ob_value *st = ob_object_get(c, "state", 5);
    if (scope && ob_typeof(scope) == OB_STRING && ob_string_len(scope))
      continue; /* a delegated plan's call, or an _each call's copy: under its call */
    n++;
    failed += st && ob_typeof(st) == OB_STRING && !strcmp(ob_string_ptr(st), "failed");
  }
  s = ob_object_set(s, "calls", 5, ob_int((int64_t)n));
  s = ob_object_set(s, "failed", 6, ob_int((int64_t)failed));
  const ob_value *plan = ob_object_get(run, "plan", 4);
  return ob_object_set(s, "plan", 4, plan ? ob_ref((ob_value *)plan) : ob_null());
}

/* --- the run as text ------------------------------------------------------------------ */

/* The end of call's last attempt, or -1 when it has none or it is running. */
static int64_t last_end(const ob_value *call) {
  const ob_value *at = ob_object_get(call, "attempts", 8);
  size_t n = at && ob_typeof(at) == OB_ARRAY ? ob_array_len(at) : 0;
  const ob_value *last = n ? ob_array_get(at, n - 1) : NULL;
  const ob_value *end = last && ob_typeof(last) == OB_ARRAY && ob_array_len(last) > 1
                            ? ob_array_get(last, 1)
                            : NULL;
  return end && ob_typeof(end) == OB_INT ? ob_int_value(end) : -1;
}

/* A call's field the light form leaves out, the page taking its default: null, "" (the
 * top scope), an empty list, the time a call settled while it has not, or when it is
 * its last attempt's end. */
static int unsaid(const char *key, const ob_value *v, const ob_value *call) {
  switch (ob_typeof(v)) {
  case OB_NULL:
    return 1;
  case OB_STRING:
    return ob_string_len(v) == 0;
  case OB_ARRAY:
    return ob_array_len(v) == 0;
  default:
    break;
  }
  if (strcmp(key, "settled") != 0)
    return 0;
  const ob_value *st = ob_object_get(call, "state", 5);
  const char *s = st && ob_typeof(st) == OB_STRING ? ob_string_ptr(st) : "";
  return !strcmp(s, "never ran") || !strcmp(s, "running") ||
         (ob_typeof(v) == OB_INT && ob_int_value(v) == last_end(call));
}

/* A call's attempts, light: [start, end] each, with the error only when there is one. */
static void write_attempts(ob_buf *b, const ob_value *attempts) {
  ob_buf_addc(b, '[');
  for (size_t i = 0; i < ob_array_len(attempts); i++) {
    const ob_value *a = ob_array_get(attempts, i);
    if (i)
      ob_buf_addc(b, ',');
    if (ob_typeof(a) != OB_ARRAY) {
      ob_json_write(b, a, OB_JSON_COMPACT);
      continue;
    }
    size_t n = ob_array_len(a);
    while (n > 2 && ob_typeof(ob_array_get(a, n - 1)) == OB_NULL)
      n--;
    ob_buf_addc(b, '[');
    for (size_t k = 0; k < n; k++) {
      if (k)
        ob_buf_addc(b, ',');
      ob_json_write(b, ob_array_get(a, k), OB_JSON_COMPACT);
    }
    ob_buf_addc(b, ']');
  }
  ob_buf_addc(b, ']');
}

/* Call c, light, as JSON into b. */
static void write_light(ob_buf *b, const ob_value *c) {
  static const char *const keep[] = {"id",   "scope",   "tool", "instance", "state", "attempts",
                                     "progress", "settled", "deps", "parent", "node"};
  int first = 1;
  ob_buf_addc(b, '{');
  for (size_t k = 0; k < sizeof keep / sizeof *keep; k++) {
    size_t n = strlen(keep[k]);
    const ob_value *v = ob_object_get(c, keep[k], n);
    if (!v || unsaid(keep[k], v, c))
      continue;
    if (!first)
      ob_buf_addc(b, ',');
    first = 0;
    ob_json_write_string(b, keep[k], n);
    ob_buf_addc(b, ':');
    if (ob_typeof(v) == OB_ARRAY && !strcmp(keep[k], "attempts"))
      write_attempts(b, v);
    else
      ob_json_write(b, v, OB_JSON_COMPACT);
  }
  ob_buf_addc(b, '}');
}

/* The run's members but its calls, as the head of an object ("{...," or "{"), in b. */
static void write_head(ob_buf *b, const ob_value *run) {
  ob_buf_addc(b, '{');
  for (size_t i = 0; i < ob_object_len(run); i++) {
    ob_value *k, *v;
    ob_object_at(run, i, &k, &v);
    if (ob_string_len(k) == 5 && !memcmp(ob_string_ptr(k), "calls", 5))
      continue;
    ob_json_write(b, k, OB_JSON_COMPACT);
    ob_buf_addc(b, ':');
    ob_json_write(b, v, OB_JSON_COMPACT);
    ob_buf_addc(b, ',');
  }
}

static void write_run(ob_ui_run *r, const ob_value *run) {
  const ob_value *calls = ob_object_get(run, "calls", 5);
  size_t n = calls && ob_typeof(calls) == OB_ARRAY ? ob_array_len(calls) : 0;
  ob_buf_init(&r->full);
  ob_buf_init(&r->light);
  write_head(&r->full, run);
  write_head(&r->light, run);
  ob_buf_add(&r->full, "\"calls\":[", 9);
  ob_buf_add(&r->light, "\"calls\":[", 9);
  r->ncalls = n;
  r->at = ob_xmalloc((2 * n + 1) * sizeof *r->at);
  for (size_t i = 0; i < n; i++) {
    const ob_value *c = ob_array_get(calls, i);
    if (i) {
      ob_buf_addc(&r->full, ',');
      ob_buf_addc(&r->light, ',');
    }
    r->at[2 * i] = r->full.len;
    ob_json_write(&r->full, c, OB_JSON_COMPACT);
    r->at[2 * i + 1] = r->full.len;
    write_light(&r->light, c);
  }
  ob_buf_add(&r->full, "]}", 2);
  ob_buf_add(&r->light, "]}", 2);
}

/* --- the store ------------------------------------------------------------------------- */

/* The runs kept within the store's bytes, e (just asked for) first, then the newest
 * asked: the others let go. */
static void keep_within(ob_ui_store *s, entry *e) {
  for (;;) {
    long long total = 0;
    entry *oldest = NULL;
    size_t i = 0;
    ob_map_entry *me;
    while (ob_map_next(&s->entries, &i, &me)) {
      entry *x = me->val;
      if (!x->kept)
        continue;
      total += x->size;
      if (x != e && (!oldest || x->asked < oldest->asked))
        oldest = x;
    }
    if (total <= s->keep || !oldest)
      return;
    run_drop(oldest);
  }
}

/* The entry of the journal at path, read again when it is not as it was read (or its
 * run's text is wanted and was let go); NULL when it is not a journal. The text is
 * written at every read, the list's too: the page asks next for a run the list showed. */
static entry *entry_of(ob_ui_store *s, const char *path, const struct stat *st, int text) {
  entry *e = ob_map_get(&s->entries, path, strlen(path));
  long long mt = (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec;
  int same = e && e->size == (long long)st->st_size && e->mtime_ns == mt;
  if (same && (!text || e->kept))
    return e;
  ob_error err;
  ob_value *run = ob_trace_build(path, OB_TRACE_RUN, NULL, &err);
  if (!run)
    return NULL;
  if (!e) {
    e = ob_xcalloc(1, sizeof *e);
    ob_map_put(&s->entries, path, strlen(path), e);
  }
  ob_unref(e->summary);
  run_drop(e);
  e->summary = summarize(path, run);
  e->size = (long long)st->st_size;
  e->mtime_ns = mt;
  write_run(&e->run, run);
  e->kept = 1;
  e->asked = ++s->ticks;
  ob_unref(run);
#if defined(__GLIBC__)
  if (st->st_size > (8 << 20)) /* the values of a big run let go: their memory given back
                                  (a 100,000-call run's: 300 MB; 20 ms) */
    malloc_trim(0);
#endif
  keep_within(s, e);
  return e;
}

const ob_value *ob_ui_store_summary(ob_ui_store *s, const char *path, const struct stat *st) {
  entry *e = entry_of(s, path, st, 0);
  return e ? e->summary : NULL;
}

const ob_ui_run *ob_ui_store_run(ob_ui_store *s, const char *path, const struct stat *st,
                                 const ob_value **summary) {
  entry *e = entry_of(s, path, st, 1);
  if (!e)
    return NULL;
  e->asked = ++s->ticks;
  keep_within(s, e);
  *summary = e->summary;
  return &e->run;
}
