/* ob_order.c -- the key order of a run's output (ob_order.h).
 *
 * The tree's nodes live in one array, each a hash map from a key to its child's
 * number + 1 (ob_map keeps the order keys were first put: the plan's order). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ob_map.h"
#include "base/ob_mem.h"
#include "plan/ob_order.h"

struct ob_order {
  ob_map *nodes; /* nodes[0] is the root */
  size_t n, cap;
};

static size_t node_new(ob_order *o) {
  if (o->n == o->cap) {
    o->cap = o->cap ? 2 * o->cap : 16;
    o->nodes = ob_xrealloc(o->nodes, o->cap * sizeof *o->nodes);
  }
  ob_map_init(&o->nodes[o->n]);
  return o->n++;
}

static void add_path(ob_order *o, const ob_path *p) {
  size_t at = 0;
  for (size_t i = 0; i < p->n; i++) {
    const ob_seg *s = &p->segs[i];
    uintptr_t kid = (uintptr_t)ob_map_get(&o->nodes[at], s->key, s->keylen);
    if (!kid) {
      kid = node_new(o) + 1;
      ob_map_put(&o->nodes[at], s->key, s->keylen, (void *)kid);
    }
    at = kid - 1;
  }
}

ob_order *ob_order_new(const ob_plan *p) {
  ob_order *o = ob_xcalloc(1, sizeof *o);
  node_new(o);
  for (size_t c = 0; c < p->ncalls; c++) {
    const ob_expr *e = &p->calls[c].output;
    if (!p->calls[c].has_output)
      continue;
    for (size_t a = 0; a < e->n; a++)
      for (size_t r = 0; r < e->alts[a].n; r++) {
        const ob_reference *ref = &e->alts[a].refs[r];
        if (ref->kind && !strcmp(ref->kind, "state"))
          add_path(o, &ref->path);
      }
  }
  return o;
}

void ob_order_free(ob_order *o) {
  if (!o)
    return;
  for (size_t i = 0; i < o->n; i++)
    ob_map_free(&o->nodes[i]);
  free(o->nodes);
  free(o);
}

long ob_order_at(const ob_order *o, const ob_path *p) {
  size_t at = 0;
  for (size_t i = 0; i < p->n; i++) {
    uintptr_t kid = (uintptr_t)ob_map_get(&o->nodes[at], p->segs[i].key, p->segs[i].keylen);
    if (!kid)
      return -1;
    at = kid - 1;
  }
  return (long)at;
}

ob_value *ob_order_apply(const ob_order *o, long node, ob_value *v) {
  if (node < 0 || !v)
    return v;
  const ob_map *kids = &o->nodes[node];
  if (!kids->n)
    return v;
  ob_map_entry *e;
  if (ob_typeof(v) == OB_OBJECT) {
    ob_value *out = ob_object();
    for (size_t i = 0; ob_map_next(kids, &i, &e);) {
      ob_value *x = ob_object_get(v, e->key, e->len);
      if (x)
        out = ob_object_add(out, e->key, e->len,
                            ob_order_apply(o, (long)((uintptr_t)e->val - 1), ob_ref(x)));
    }
    if (ob_object_len(out) < ob_object_len(v)) {
      ob_object_iter it;
      ob_value *k, *x;
      ob_object_iter_init(&it, v);
      while (ob_object_iter_next(&it, &k, &x))
        if (!ob_map_get(kids, ob_string_ptr(k), ob_string_len(k)))
          out = ob_object_setv(out, k, ob_ref(x));
    }
    ob_unref(v);
    return out;
  }
  if (ob_typeof(v) == OB_ARRAY) { /* elements in place; inside them, the order */
    for (size_t i = 0; ob_map_next(kids, &i, &e);) {
      char *end;
      unsigned long long k = strtoull(e->key, &end, 10);
      if (*e->key < '0' || *e->key > '9' || end != e->key + e->len || k >= ob_array_len(v) ||
          (e->key[0] == '0' && e->len > 1))
        continue;
      ob_value *x = ob_ref(ob_array_get(v, (size_t)k));
      v = ob_array_set(v, (size_t)k, ob_order_apply(o, (long)((uintptr_t)e->val - 1), x));
    }
  }
  return v;
}
