/* ob_ui_store.h -- the runs `obelus ui` has read (ob_ui_store.c): each journal's summary
 * for the list, and for the newest asked, the run's JSON kept as text, whole and light,
 * with each call's place in it. */
#ifndef OB_UI_STORE_H
#define OB_UI_STORE_H

#include <stddef.h>
#include <sys/stat.h>

#include "base/ob_buf.h"
#include "base/ob_value.h"

typedef struct ob_ui_store ob_ui_store;

/* A run read: the JSON of ob_trace.h's OB_TRACE_RUN, whole (full) and light (each call
 * without params, resolved, output and error, nor what goes without saying: null, "",
 * [], the time a call not settled settled, or when it is its last attempt's end; an
 * attempt's error when it has none); call i's JSON in full is at [at[2i], at[2i+1]). */
typedef struct ob_ui_run {
  ob_buf full, light;
  size_t *at, ncalls;
} ob_ui_run;

/* keep: how many bytes of journals the runs kept may stand for (their text takes about
 * the size of their journal). */
ob_ui_store *ob_ui_store_new(long long keep);
void ob_ui_store_free(ob_ui_store *s);

/* The summary of the journal at path (st: its lstat), read again when its size or time
 * changed: {"state" (done, failed, running, killed-resumable), "started", "ended",
 * "calls", "failed", "plan"}; NULL when it is not a journal. Borrowed: valid until the
 * store is next asked. */
const ob_value *ob_ui_store_summary(ob_ui_store *s, const char *path, const struct stat *st);

/* The run of the journal at path, and (*summary) its summary; NULL when it is not a
 * journal. Read when it is not kept or the file changed, then kept with the newest
 * asked within the store's bytes. Borrowed, as above. */
const ob_ui_run *ob_ui_store_run(ob_ui_store *s, const char *path, const struct stat *st,
                                 const ob_value **summary);

#endif
