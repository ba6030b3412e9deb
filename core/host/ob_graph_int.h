/* ob_graph_int.h -- the graph's model, shared by its builder (ob_graph.c) and its
 * printers (ob_graph_text.c). Not part of the library's interface. */
#ifndef OB_GRAPH_INT_H
#define OB_GRAPH_INT_H

#include "host/ob_graph.h"

typedef enum { SHAPE_CALL, SHAPE_DETACHED } node_shape;

typedef struct glevel glevel;

typedef struct gnode {
  char *label;       /* lines joined by '\n', not escaped */
  node_shape shape;
  const char *fill;  /* a colour such as "#c6efce", or NULL for the default */
  const char *klass; /* its outcome as a class name (a journal told it), or NULL */
  glevel *sub;       /* the run the call made (a journal told it), or NULL */
} gnode;

/* The calls of one plan: the top one, an _each call's copies, a delegated plan. */
struct glevel {
  const ob_plan *plan; /* NULL for copies (their plan is only read for labels) */
  ob_plan *owned;      /* plan, when the level read it (freed with it) */
  int each;            /* an _each call's copies */
  int depth;           /* 0 at the top */
  char *title;         /* the box's label below the call that made it */
  size_t total, shown; /* its calls, and the first `shown` of them drawn */
  gnode *nodes;        /* shown of them */
  char *more;          /* the "... N more" node's label, or NULL */
  char *name, *idp;    /* its nodes' names and ids: name or idp and a position */
};

struct ob_graph {
  glevel top;
  size_t budget;    /* nodes left to draw (SIZE_MAX: no bound) */
  size_t max_edges; /* 0: no bound */
};

/* An edge, made and printed at once (never held). */
typedef struct gedge {
  size_t from, to;   /* positions in its level */
  const char *label; /* lines joined by '\n', not escaped; "" for none */
  int branch;        /* through one `||` alternative of the writer: dashed */
  int cycle;         /* both ends on one dependency cycle: drawn red */
} gedge;

typedef struct gdraw gdraw;
struct gdraw {
  ob_buf *out;
  void (*edge)(gdraw *d, const glevel *lv, const char *ind, const gedge *e);
  size_t edges, skipped, max_edges;
};

/* Prints every edge between lv's drawn calls through d->edge (ind: the indentation),
 * counting those past d->max_edges instead. */
void ob_graph_each_edge(gdraw *d, const glevel *lv, const char *ind);

#endif
