/* ob_suggest.h -- "did you mean": the known name nearest a misspelt one (ob_suggest.c),
 * for every message that names something unknown (a command, an option, a reference's
 * path, a tool, a key of a tool table, a schema keyword). */
#ifndef OB_SUGGEST_H
#define OB_SUGGEST_H

#include <stddef.h>

/* The distance between a and b: the fewest letters inserted, deleted or changed, or two
 * neighbours swapped, that make one the other (optimal string alignment), case
 * counting. Stops counting past max: then any number above max. */
size_t ob_suggest_distance(const char *a, const char *b, size_t max);

/* The name among names[0..n) nearest word, when it is near enough to be what was meant
 * (a distance of at most 1 for a word of up to 4 letters, 2 up to 8, else a third of
 * its length), and not word itself; the first of equals; NULL when none is. Borrowed
 * from names. */
const char *ob_suggest(const char *word, const char *const *names, size_t n);

/* The same, names one after another: a suggester keeps the best so far. */
typedef struct ob_suggester {
  const char *word;
  const char *best;
  size_t dist;
} ob_suggester;
void ob_suggester_init(ob_suggester *s, const char *word);
void ob_suggester_add(ob_suggester *s, const char *name); /* name must outlive s's use */
const char *ob_suggester_best(const ob_suggester *s);

#endif
