/* ob_gzip.h -- one gzip stream for many readers, made of pieces compressed once
 * (ob_gzip.c): what lets fifty viewers of a run's events share each event's compressed
 * bytes, though each joined at its own point. */
#ifndef OB_GZIP_H
#define OB_GZIP_H

#include <stddef.h>
#include <stdint.h>

#include "base/ob_buf.h"
#include "base/ob_error.h"

typedef struct ob_gzip ob_gzip;

/* A compressor (zlib, loaded at the first one): NULL, with err saying why, when zlib
 * cannot be loaded. */
ob_gzip *ob_gzip_new(ob_error *err);
void ob_gzip_free(ob_gzip *g);

/* Appends to out the bytes of data (len) compressed as a piece: deflate blocks that
 * refer to nothing before them and end on a byte (a full flush), none of them the
 * last. Any sequence of pieces, from any compressor, after ob_gzip_head and before
 * ob_gzip_tail, is a whole gzip stream. 0, or -1 (zlib failed: out as it was). */
int ob_gzip_piece(ob_gzip *g, const char *data, size_t len, ob_buf *out);

/* What the tail of a reader's stream must say: the CRC-32 and the length of every byte
 * its pieces held, in order. */
typedef struct ob_gzip_sum {
  uint32_t crc;
  uint64_t len;
} ob_gzip_sum;

/* (These two need zlib loaded: after an ob_gzip_new that succeeded.)
 * sum extended by bytes whose own sum is more (crc32_combine: O(log len)). */
void ob_gzip_sum_add(ob_gzip_sum *sum, ob_gzip_sum more);
/* The sum of data (len), or of nothing when len is 0. */
ob_gzip_sum ob_gzip_sum_of(const char *data, size_t len);

/* The 10 bytes that begin a gzip stream, and those that end it: an empty last block,
 * then sum's CRC and length. */
void ob_gzip_head(ob_buf *out);
void ob_gzip_tail(ob_buf *out, ob_gzip_sum sum);

#endif
