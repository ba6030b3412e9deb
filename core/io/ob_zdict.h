/* ob_zdict.h -- small texts compressed against a dictionary both sides know
 * (ob_zdict.c): raw deflate (RFC 1951) with a preset dictionary, in one call each way.
 * What keeps a finished job's journal small in Redis (fleet/ob_queue_journal.c). */
#ifndef OB_ZDICT_H
#define OB_ZDICT_H

#include <stddef.h>

#include "base/ob_buf.h"
#include "base/ob_error.h"

/* Appends to out data (len) deflated at level (1 to 9) with dict (dlen; only its last
 * 32 KB count) as the preset dictionary. OB_OK, or an error (OB_EIO: zlib cannot be
 * loaded; out as it was). */
int ob_zdict_deflate(const char *dict, size_t dlen, const char *data, size_t len, int level,
                     ob_buf *out, ob_error *err);

/* Appends to out what data (len) inflates to with dict (dlen) as the dictionary, at most
 * max bytes (more is refused: a bomb). OB_OK, or an error, out as it was: OB_EINVAL when
 * data is not one whole deflate stream made with that dictionary, OB_ENOMEM past max,
 * OB_EIO when zlib cannot be loaded. */
int ob_zdict_inflate(const char *dict, size_t dlen, const char *data, size_t len, size_t max,
                     ob_buf *out, ob_error *err);

#endif
