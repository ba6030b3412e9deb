/* ob_toolname.h -- tool names as LLM APIs take them (ob_toolname.c): the OpenAI and
 * Anthropic tool-calling APIs accept a tool's name only when it matches
 * ^[a-zA-Z0-9_-]{1,64}$, while a tool may be named anything non-empty ("weather.lookup
 * now", "météo"). Every export of the tools for a model (`obelus tools --format openai |
 * anthropic`, the plan schemas) gives each tool its API name; every call a model makes
 * with one (a plan's _tool, a loop step's calls, MCP's tools/call) is resolved back to
 * the tool here. One rule, one place, both directions.
 *
 * The rule, over the set of loaded tools (so the same set always gets the same names):
 *  1. A name that matches the pattern is its own API name.
 *  2. Another name is sanitized: each character (a UTF-8 sequence counts as one) that
 *     is not a letter, digit, '_' or '-' becomes '_'. The result is its API name when
 *     it has at most 64 characters, no other tool sanitizes to it, and it is not the
 *     name of a tool under rule 1.
 *  3. Otherwise (too long, or two tools or a real name would share it, in which case
 *     none of the sharers gets it): the first 55 characters of the sanitized name, '_',
 *     and 8 lowercase hex digits: the low 32 bits of FNV-1a 64 of the tool's real name
 *     (its bytes). Taken in byte order of the real names; when that name is already
 *     someone's, round k = 1, 2, ... hashes the name followed by '#' and k in decimal.
 * So an API name never equals a real name other than its own tool's, and resolving is
 * unambiguous: a name that is a loaded tool's real name is that tool (a real name
 * always wins), else the tool whose API name it is, else none.
 *
 * Costs: making the names of a set, a sort of the names and a hash map (O(n log n) in
 * the tools, O(total length) in bytes); a lookup, one hash. Resolving a name that is
 * not a real one builds the set's names once per ob_toolnames (callers keep one for a
 * whole plan), none when every name is real. */
#ifndef OB_TOOLNAME_H
#define OB_TOOLNAME_H

#include <stddef.h>

#include "base/ob_map.h"

#define OB_TOOLNAME_MAX 64

/* Whether name (len bytes) matches ^[a-zA-Z0-9_-]{1,64}$. */
int ob_toolname_ok(const char *name, size_t len);

/* The API names of a set of tools: a map from real name to anything (an engine's
 * tools: name -> ob_tool*). */
typedef struct ob_toolnames {
  size_t n;
  const char **real; /* sorted in byte order; borrowed from the map's keys */
  char **api;        /* api[i]: real[i]'s API name */
  void **val;        /* the map's values, in the same order */
  ob_map by_api;     /* API name -> index + 1 */
  ob_map by_real;    /* real name -> index + 1 */
} ob_toolnames;

/* Makes the names of the tools in `tools` (which must outlive tn). */
void ob_toolnames_init(ob_toolnames *tn, const ob_map *tools);
void ob_toolnames_free(ob_toolnames *tn);
/* The API name of real name `real`, or NULL when no tool has it. Borrowed from tn. */
const char *ob_toolnames_api(const ob_toolnames *tn, const char *real);
/* The value (the tool) that `name` names: its real name first, else its API name;
 * NULL when neither. */
void *ob_toolnames_find(const ob_toolnames *tn, const char *name, size_t len);

/* A lazily made ob_toolnames: what a caller resolving many names keeps (a plan's
 * calls): the names are made at the first name that is not a real one. */
typedef struct ob_toolname_resolver {
  const ob_map *tools;
  int made;
  ob_toolnames tn;
} ob_toolname_resolver;
void ob_toolname_resolver_init(ob_toolname_resolver *r, const ob_map *tools);
void ob_toolname_resolver_free(ob_toolname_resolver *r);
/* The tool `name` names (real name first, then API name), or NULL. */
void *ob_toolname_resolve(ob_toolname_resolver *r, const char *name, size_t len);

#endif
