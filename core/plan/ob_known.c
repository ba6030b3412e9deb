/* ob_known.c -- references that nothing can provide (issue 30): refused before anything
 * runs, with the nearest path that does exist ("did you mean †state.cities?").
 *
 * A reference part can be present when the call reads it only if some call writes a
 * path overlapping it in a scope the reader sees (the graph found that already: the
 * part's seen flag, ob_plan.h), or the messages given before the run (the plan's
 * context and the inputs, read into a log by the caller) hold it in the reader's view.
 * Nothing else writes a document during a run, so a part with neither is absent for
 * certain, and an expression is absent for certain when each of its || alternatives has
 * such a part: at run time it would be a structural error (a call's param) or a null
 * (the output template). Those are what is refused; an alternative that can be present
 * covers the others (`†input.nickname || †input.name`). Two kinds are not judged: `input`
 * when no input was given (it comes at run time, `run --input`, completing what the
 * context gives: plans/weather's context has markerDir, --input the city), and `error`
 * (the engine writes it when a call fails). An instanced call's copies are judged each in their own
 * view and reported once, by the first copy refused.
 *
 * The suggestion comes from every path the plan's calls write, with their prefixes
 * (†state.user for a call writing †state.user.name), and every path of the given
 * documents, nearest first (ob_suggest), compared without the dagger.
 *
 * Costs: a log read for each part no call writes; nothing for the others. The
 * candidates are gathered only when something is refused (at most MAX_CANDIDATES of
 * them) and each distinct text is matched once (at most MAX_SUGGESTED texts). */
#include <stdlib.h>
#include <string.h>

#include "base/ob_mem.h"
#include "base/ob_suggest.h"
#include "log/ob_log.h"
#include "plan/ob_plan.h"

#define MAX_CANDIDATES 100000
#define MAX_SUGGESTED 256
#define MAX_CONTEXT_DEPTH 16

typedef struct known {
  ob_plan *p;
  ob_log *given;
  int judge_input;         /* inputs were given: kind input is judged too */
  const char *given_by;    /* "", or " and is not in the context" (or --input) */
  int gathered;
  ob_map names;            /* candidate text (no dagger) -> 1, for their dedupe */
  ob_map said;             /* a text matched -> its suggestion (or the map itself: none) */
  size_t nsaid;
  char *made[MAX_SUGGESTED]; /* suggestions composed of a name and a tail (freed at the end) */
  size_t nmade;
} known;

static const char *undaggered(const char *s) {
  return strncmp(s, OB_DAGGER, OB_DAGGER_LEN) ? s : s + OB_DAGGER_LEN;
}

static void add_name(known *k, const char *kind, const ob_path *path) {
  if (k->names.n >= MAX_CANDIDATES)
    return;
  ob_buf b;
  ob_buf_init(&b);
  ob_ref_format(&b, kind, path);
  const char *text = undaggered(b.data);
  ob_map_put(&k->names, text, strlen(text), k);
  ob_buf_free(&b);
}

/* The paths of document value v, below path (of depth n, room for MAX_CONTEXT_DEPTH). */
static void add_doc(known *k, const char *kind, ob_seg *segs, size_t n, const ob_value *v) {
  ob_path path = {n, segs};
  add_name(k, kind, &path);
  if (ob_typeof(v) != OB_OBJECT || n == MAX_CONTEXT_DEPTH)
    return;
  ob_object_iter it;
  ob_value *key, *x;
  ob_object_iter_init(&it, v);
  while (ob_object_iter_next(&it, &key, &x) && k->names.n < MAX_CANDIDATES) {
    segs[n] = (ob_seg){.key = (char *)ob_string_ptr(key), .keylen = ob_string_len(key),
                       .index = -1};
    add_doc(k, kind, segs, n + 1, x);
  }
}

/* Every document of one scope ({kind: doc}). */
static void add_docs(known *k, const ob_value *docs) {
  ob_seg segs[MAX_CONTEXT_DEPTH];
  ob_object_iter it;
  ob_value *kind, *doc;
  if (ob_typeof(docs) != OB_OBJECT)
    return;
  ob_object_iter_init(&it, docs);
  while (ob_object_iter_next(&it, &kind, &doc))
    add_doc(k, ob_string_ptr(kind), segs, 0, doc);
}

static void gather(known *k) {
  k->gathered = 1;
  for (size_t i = 0; i < k->p->ncalls; i++) {
    const ob_call *c = &k->p->calls[i];
    for (size_t a = 0; c->has_output && a < c->output.n; a++)
      for (size_t r = 0; r < c->output.alts[a].n; r++) {
        const ob_reference *x = &c->output.alts[a].refs[r];
        for (size_t n = 0; n <= x->path.n; n++) { /* the path and each of its prefixes */
          ob_path prefix = {n, x->path.segs};
          add_name(k, x->kind, &prefix);
        }
      }
  }
  if (!ob_log_len(k->given))
    return;
  ob_value *all = ob_log_documents(k->given, ob_log_len(k->given));
  add_docs(k, ob_object_get(all, "documents", 9));
  ob_value *inst = ob_object_get(all, "instances", 9), *name, *docs;
  if (inst && ob_typeof(inst) == OB_OBJECT) {
    ob_object_iter it;
    ob_object_iter_init(&it, inst);
    while (ob_object_iter_next(&it, &name, &docs))
      add_docs(k, docs);
  }
  ob_unref(all);
}

/* The candidate nearest word, nearer than ob_suggest asks: some of its last name (of
 * length last) must stay (†state.x is no slip for †state.a); or NULL. */
static const char *nearest(known *k, const char *word, size_t last) {
  ob_suggester s;
  ob_suggester_init(&s, word);
  size_t i = 0;
  ob_map_entry *e;
  while (ob_map_next(&k->names, &i, &e))
    ob_suggester_add(&s, e->key);
  return s.dist < last ? ob_suggester_best(&s) : NULL; /* names' key: k's */
}

/* The path nearest x (as written), dagger put back by the caller; or NULL. When the whole
 * text has none, the slip is looked for where the path leaves every known one: the first
 * prefix no candidate names (†state.greting of †state.greting.text), its nearest name
 * given back with the rest of the path (†state.greeting.text). */
static const char *suggest(known *k, const ob_reference *x) {
  const char *word = undaggered(x->text);
  void *was = ob_map_get(&k->said, word, strlen(word));
  if (was)
    return was == (void *)&k->said ? NULL : was;
  if (k->nsaid >= MAX_SUGGESTED)
    return NULL;
  if (!k->gathered)
    gather(k);
  size_t last = x->path.n ? x->path.segs[x->path.n - 1].keylen : strlen(x->kind);
  const char *best = nearest(k, word, last);
  if (!best && x->path.n > 1) {
    ob_buf whole, pre;
    ob_buf_init(&whole);
    ob_buf_init(&pre);
    ob_ref_format(&whole, x->kind, &x->path);
    const char *w = undaggered(whole.data), *p = NULL;
    size_t n, plen = 0;
    for (n = 1; n < x->path.n && x->path.segs[n - 1].keylen; n++) { /* the first unknown prefix */
      pre.len = 0;
      ob_ref_format(&pre, x->kind, &(ob_path){n, x->path.segs});
      p = undaggered(pre.data);
      plen = strlen(p);
      if (!ob_map_get(&k->names, p, plen))
        break;
    }
    const char *head = n < x->path.n && x->path.segs[n - 1].keylen && !strncmp(w, p, plen)
                           ? nearest(k, p, x->path.segs[n - 1].keylen)
                           : NULL;
    if (head) {
      size_t hlen = strlen(head), tlen = strlen(w + plen);
      char *m = ob_xmalloc(hlen + tlen + 1);
      memcpy(m, head, hlen);
      memcpy(m + hlen, w + plen, tlen + 1);
      best = k->made[k->nmade++] = m;
    }
    ob_buf_free(&pre);
    ob_buf_free(&whole);
  }
  ob_map_put(&k->said, word, strlen(word), best ? (void *)best : (void *)&k->said);
  k->nsaid++;
  return best;
}

/* Do the given messages hold x in instance's view (NULL: global)? */
static int given_has(known *k, const ob_reference *x, const char *instance) {
  ob_value *v = ob_log_read(k->given, x->kind, instance, &x->path, OB_LOG_NOW);
  ob_unref(v);
  return v != NULL;
}

/* The same for the output template: the global view, or any instance's. */
static int given_has_any(known *k, const ob_reference *x) {
  if (given_has(k, x, NULL))
    return 1;
  for (size_t i = 0; i < k->p->ninstances; i++)
    if (given_has(k, x, k->p->instances[i]))
      return 1;
  return 0;
}

/* Refuses reference r when each of its alternatives has a part nothing provides: one
 * problem per alternative, naming that part. c NULL: the output template's. Returns the
 * number of problems. */
static size_t judge(known *k, const ob_call *c, const ob_param_ref *r) {
  const unsigned char *seen = ob_param_ref_seen_c(r);
  const ob_reference *dead_inline[4], **dead = r->expr.n <= 4 ? dead_inline
                                                               : ob_xmalloc(r->expr.n * sizeof *dead);
  size_t part = 0, a;
  for (a = 0; a < r->expr.n; a++) {
    const ob_alt *alt = &r->expr.alts[a];
    dead[a] = NULL;
    for (size_t i = 0; i < alt->n; i++, part++) {
      const ob_reference *x = &alt->refs[i];
      if (dead[a] || seen[part] || !strcmp(x->kind, "error") || !strcmp(x->kind, "each") ||
          (!k->judge_input && !strcmp(x->kind, "input")))
        continue;
      if (!(c ? given_has(k, x, c->instance) : given_has_any(k, x)))
        dead[a] = x;
    }
    if (!dead[a])
      break; /* this alternative can be present: it covers the others */
  }
  size_t n = 0;
  for (size_t i = 0; a == r->expr.n && i < r->expr.n; i++) {
    const char *best = suggest(k, dead[i]);
    char where[300];
    if (!c)
      snprintf(where, sizeof where, "output%s%.200s", r->where[0] ? " " : "", r->where);
    else if (!strcmp(r->where, "_each"))
      snprintf(where, sizeof where, "_each");
    else
      snprintf(where, sizeof where, "parameter \"%.200s\"", r->where);
    ob_plan_error(k->p, c, "%s: %.300s is written by no call%s%s%s%.300s%s", where,
                  dead[i]->text, k->given_by, best ? " (did you mean " : "",
                  best ? OB_DAGGER : "", best ? best : "", best ? "?)" : "");
    n++;
  }
  if (dead != dead_inline)
    free(dead);
  return n;
}

static void known_free(known *k) {
  ob_map_free(&k->names);
  ob_map_free(&k->said);
  for (size_t i = 0; i < k->nmade; i++)
    free(k->made[i]);
}

size_t ob_plan_check_known(ob_plan *p, ob_log *given, size_t ninputs, const char *input_label) {
  if (!p->graphed || p->over_limit)
    return 0;
  size_t before = p->nerrors, ncontext = ob_array_len(p->context);
  known k = {.p = p, .given = given};
  ob_map_init(&k.names);
  ob_map_init(&k.said);
  k.judge_input = ninputs > 0;
  char by[120];
  if (!ncontext && !ninputs)
    by[0] = '\0';
  else
    snprintf(by, sizeof by, " and is not in %s%s%.60s", ncontext ? "the context" : "",
             ncontext && ninputs ? " or " : "", ninputs ? input_label : "");
  k.given_by = by;
  /* an instanced call's copies: one report, the first copy refused */
  size_t ntemplates = 0;
  for (size_t i = 0; i < p->ncalls; i++)
    if (p->calls[i].index + 1 > ntemplates)
      ntemplates = p->calls[i].index + 1;
  unsigned char *told = ob_xcalloc(ntemplates ? ntemplates : 1, 1);
  for (size_t i = 0; i < p->ncalls; i++) {
    const ob_call *c = &p->calls[i];
    if (c->instance_shared && told[c->index])
      continue;
    size_t found = 0;
    for (size_t r = 0; r < c->nrefs; r++)
      found += judge(&k, c, &c->refs[r]);
    if (found && c->instance_shared)
      told[c->index] = 1;
  }
  free(told);
  for (size_t r = 0; r < p->nout_refs; r++)
    judge(&k, NULL, &p->out_refs[r]);
  known_free(&k);
  return p->nerrors - before;
}

int ob_plan_suggest_ref(ob_plan *p, ob_log *now, const ob_reference *x, ob_buf *out) {
  known k = {.p = p, .given = now};
  ob_map_init(&k.names);
  ob_map_init(&k.said);
  const char *best = suggest(&k, x);
  if (best) {
    ob_buf_add(out, OB_DAGGER, OB_DAGGER_LEN);
    ob_buf_add(out, best, strlen(best));
  }
  known_free(&k);
  return best != NULL;
}
