/* ob_order.h -- the key order of a run's output (ob_order.c): objects list their keys
 * in the plan's order, not in the order parallel writes landed, so that two runs of a
 * plan (a resumed one and an uninterrupted one) print byte-identical output.
 *
 * The order is a tree of keys made from the plan's calls, in plan order: each call's
 * _outputPath parts in the "state" kind, segment by segment (a key first named by an
 * earlier call comes first). Applying it to a value rebuilds each object on a path the
 * tree knows: its keys the tree names first, in the tree's order, then the others in
 * the order they have (a tool's own object keeps the order the tool gave it).
 *
 * Costs: making, the output paths' segments (one hash map per tree node); applying,
 * the keys of the objects on the tree's paths (the rest of the value is shared, not
 * copied). Nothing recurses deeper than a value can be nested (OB_MAX_DEPTH). */
#ifndef OB_ORDER_H
#define OB_ORDER_H

#include "plan/ob_plan.h"

typedef struct ob_order ob_order;

/* The tree of a plan's output paths (never NULL; an empty tree when no call writes
 * the state). */
ob_order *ob_order_new(const ob_plan *p);
void ob_order_free(ob_order *o);
/* The node at path p from the root (the state document's), or -1: nothing known there. */
long ob_order_at(const ob_order *o, const ob_path *p);
/* v with its objects re-keyed from node (0: the root); consumes v. */
ob_value *ob_order_apply(const ob_order *o, long node, ob_value *v);

#endif
