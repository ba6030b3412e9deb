/* ob_ui_follow.h -- journals followed as they grow, for the viewers of `obelus ui`'s
 * GET /api/runs/{id}/events (ob_ui_follow.c): Server-Sent Events, a snapshot first, then
 * the records appended since, as they come. */
#ifndef OB_UI_FOLLOW_H
#define OB_UI_FOLLOW_H

#include <uv.h>

#include "base/ob_value.h"
#include "io/ob_httpd.h"

typedef struct ob_ui_follow ob_ui_follow;

/* The snapshot of the run whose journal is path, as the viewer gets it first (the JSON
 * of GET /api/runs/{id}?calls=light) into out: 0, or -1 when there is none any more. */
typedef int (*ob_ui_snapshot_fn)(void *ud, const char *path, ob_buf *out);

ob_ui_follow *ob_ui_follow_new(uv_loop_t *loop, ob_ui_snapshot_fn snapshot, void *ud);

/* Makes res a stream of the events of the journal at path (an absolute path under a
 * --journals folder, checked by the caller): `event: snapshot` (the whole run), then
 * `event: records` (a JSON array of the journal's new records, as it holds them) as the
 * file grows, `event: end` ({"exit": N}) once its end record is read, after which the
 * stream ends. gzip: the client takes it (Accept-Encoding): the stream is then gzip,
 * each event compressed once for all such viewers (ob_gzip.h). Returns 0, or -1 with
 * res answered (the file cannot be read: 404). */
int ob_ui_follow_attach(ob_ui_follow *f, const char *path, int gzip, ob_httpd_res *res);

/* An event of the server's own (a call waiting for approval) to every viewer of path:
 * `event: NAME`, data the JSON text json. Nothing when nobody views it. */
void ob_ui_follow_push(ob_ui_follow *f, const char *path, const char *name, const char *json,
                       size_t len);

/* The viewers of path, or of every journal when path is NULL. */
size_t ob_ui_follow_viewers(const ob_ui_follow *f, const char *path);

/* Ends every stream and closes the handles (as the loop runs); then, the loop run,
 * ob_ui_follow_free lets go of the rest. */
void ob_ui_follow_close(ob_ui_follow *f);
void ob_ui_follow_free(ob_ui_follow *f);

#endif
