/* ob_doc.h -- reading and writing a value at a path inside a document, with the
 * output methods of plan-format §4 (set, merge, assign, push, concat). */
#ifndef OB_DOC_H
#define OB_DOC_H

#include "base/ob_error.h"
#include "base/ob_path.h"
#include "base/ob_value.h"

typedef enum ob_method {
  OB_METHOD_SET,
  OB_METHOD_MERGE,
  OB_METHOD_ASSIGN,
  OB_METHOD_PUSH,
  OB_METHOD_CONCAT
} ob_method;

/* "set", "merge", ... -> the method, or -1 when s names none of them. */
int ob_method_parse(const char *s, size_t len);
const char *ob_method_name(ob_method m);

/* The value at the first n segments of p inside doc (borrowed), or NULL when
 * absent. doc may be NULL (an absent document). A canonical index segment
 * reads an array element when in range; any other segment on an array, and
 * any segment on a scalar, reads as absent. O(depth * log32 width). */
ob_value *ob_doc_get(const ob_value *doc, const ob_path *p, size_t n);

/* What `method` makes of `old` (borrowed, NULL = absent) and `value`
 * (borrowed). A new reference, or NULL with err filled (OB_EWRITE). */
ob_value *ob_doc_apply(ob_method method, const ob_value *old, const ob_value *value,
                       ob_error *err);

/* The document after writing value at path p with method: a new reference,
 * or NULL with err filled, doc unchanged. doc (borrowed) may be NULL (absent
 * document: written as if it were {} unless the path is empty). Only the
 * nodes along p are copied. Missing intermediates become objects. Errors
 * (plan-format §4): writing through a scalar, a non-index segment or an index past
 * the end of an array (the index equal to the length appends), the method's
 * own type errors, and a result nested deeper than OB_MAX_DEPTH. */
ob_value *ob_doc_write(const ob_value *doc, const ob_path *p, ob_method method,
                       const ob_value *value, ob_error *err);

/* Same, for the segments of p from `from` on, with doc the value found at
 * the first `from` segments; error messages still name the whole path. */
ob_value *ob_doc_write_from(const ob_value *doc, const ob_path *p, size_t from, ob_method method,
                            const ob_value *value, ob_error *err);

/* The same, on a document the caller owns (*doc, NULL = absent): on success
 * *doc is the new document (the old reference consumed); on error *doc is
 * the same document, though it may now be an equal copy (when the path ran
 * through shared containers): the caller keeps *doc either way. Containers nobody else holds are changed in place, which makes
 * a write into a wide object cost no copy at all when no old version is kept. */
int ob_doc_write_take(ob_value **doc, const ob_path *p, size_t from, ob_method method,
                      const ob_value *value, ob_error *err);

/* Deep merge (plan-format §4 `merge`): when both are objects, each key of over merges
 * into base's; otherwise over replaces. Borrowed arguments, new reference. */
ob_value *ob_doc_merge(const ob_value *base, const ob_value *over);

/* A document whose value is `value` nested under p: {"a":{"b":value}} for
 * "a.b" (index segments become keys). How output messages carry their value. */
ob_value *ob_doc_nest(const ob_path *p, const ob_value *value);

#endif
