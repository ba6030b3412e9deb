/* ob_fanout.h -- the same bytes to many HTTP streams, in order (ob_fanout.c): each
 * stream as it is, or as its own gzip stream made of pieces compressed once for all,
 * the big ones on a worker thread. What a run's fifty viewers share (ob_ui_follow.c). */
#ifndef OB_FANOUT_H
#define OB_FANOUT_H

#include <stddef.h>
#include <uv.h>

#include "io/ob_gzip.h"
#include "io/ob_httpd.h"

typedef struct ob_fanout ob_fanout;
typedef struct ob_fanout_sub ob_fanout_sub;

ob_fanout *ob_fanout_new(uv_loop_t *loop);

/* The loop's own compressor (made at the first call): the first bytes of a stream that
 * joins gzip, made now. 0, or -1 (zlib cannot be loaded or failed: out as it was). */
int ob_fanout_piece(ob_fanout *f, const char *data, size_t len, ob_buf *out);

/* st joins: it gets what is sent from now on, after what its response already holds.
 * gz: its stream is gzip, its header and first pieces (made by ob_fanout_piece) in the
 * response already, sum what they held. */
ob_fanout_sub *ob_fanout_join(ob_fanout *f, ob_httpd_stream *st, int gz, ob_gzip_sum sum);
/* Its stream is gone (the httpd's gone callback): it gets nothing more. */
void ob_fanout_leave(ob_fanout *f, ob_fanout_sub *s);

/* data (len) to every stream: at once to those taken as they are; to the gzip ones
 * once compressed (inline when small, else on the loop's thread pool), always in the
 * order sent. */
void ob_fanout_send(ob_fanout *f, const char *data, size_t len);
/* Every stream ends after what was sent (a gzip one with its tail). */
void ob_fanout_end(ob_fanout *f);
/* Ends one stream now, after what it was sent (its tail, if gzip): the server closes. */
void ob_fanout_end_sub(ob_fanout_sub *s);

/* Lets go of it (the streams are not ended: ob_fanout_end first), once no piece is
 * being compressed. */
void ob_fanout_free(ob_fanout *f);

#endif
