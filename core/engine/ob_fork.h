/* ob_fork.h -- a new run from any point of a journal, with changes (`obelus fork`). */
#ifndef OB_FORK_H
#define OB_FORK_H

#include "base/ob_value.h"
#include "log/ob_wal.h"

typedef struct ob_fork_options {
  const char *source;   /* the journal forked (never written) */
  long long at;         /* --at N: its first N messages are kept (-1: not given) */
  const char *from;     /* --from ID: a call of its top-level plan, run again with all
                           that follows from it (NULL: not given); one of at, from */
  const ob_value *sets; /* --set: an array of ["†kind.path", value] pairs, or NULL */
  const ob_value *inputs; /* --input: an array of input documents, or NULL */
  const char *journal;  /* the new journal (a path; refused when it exists, not empty,
                           unless overwrite) */
  int overwrite;
  ob_fsync fsync;
} ob_fork_options;

typedef struct ob_fork_result {
  size_t inherited;  /* messages kept from the source */
  size_t kept;       /* top-level calls that completed and stay done */
  size_t rerun;      /* top-level calls that run (again) */
} ob_fork_result;

/* Writes the journal of the fork (ob_fork.c says what it holds): `obelus resume` of it
 * then runs it. OB_OK; or an error with err naming the journal (and its line), the
 * option, or the call: a source that is not a journal or a loop's, --at past its
 * messages or before its run began, --from a call its plan does not have (a copy
 * "<id>[i]" or a delegated plan's call: fork from the call that made it), a --set
 * reference that does not parse, the new journal not writable. */
int ob_fork_write(const ob_fork_options *o, ob_fork_result *res, ob_error *err);

/* Parses a --set argument "†kind.path=JSON" into a pair ["†kind.path", value] (a new
 * value), or NULL with err. */
ob_value *ob_fork_parse_set(const char *arg, ob_error *err);

#endif
