/* ob_gzip.c -- one gzip stream for many readers, made of pieces compressed once.
 *
 * A Server-Sent Events stream of a busy run is mostly the same bytes sent to each of
 * its viewers; on this machine, sending them fifty times costs the loop the run goes
 * on more than the run itself (bench/ui.lua). Compressed, the records of a run are a
 * twelfth of their size, but a gzip stream per viewer would compress each event fifty
 * times. So each event is compressed once, as a piece: zlib's raw deflate ended with a
 * full flush, after which nothing refers back (RFC 1951's blocks: a piece ends on a
 * byte, and no block in it is marked last). Pieces then join in any order: a viewer
 * who comes late gets the gzip header, the pieces of a snapshot and of what came since,
 * then the same pieces as everyone; its stream ends with an empty last block and the
 * CRC-32 and length of what it was sent (RFC 1952), which each viewer sums for itself
 * with crc32_combine. The pieces cost a few percent of size against one stream (each
 * starts without a dictionary).
 *
 * zlib is loaded when the first compressor is made (ob_zlib.h), as libwebsockets is:
 * nothing but `obelus ui` needs it. The compressor: level 1 (the fastest: a 300 KB
 * batch of records in about 3 ms), its memory about 300 KB.
 *
 * Costs: a piece, one deflate pass over its bytes; a sum, one crc32 pass; a reader's
 * tail, O(log n) per piece it was sent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/ob_mem.h"
#include "io/ob_gzip.h"
#include "io/ob_zlib.h"

struct ob_gzip {
  z_stream z;
  const ob_zlib *zl;
};

ob_gzip *ob_gzip_new(ob_error *err) {
  const char *why = NULL;
  const ob_zlib *zl = ob_zlib_get(&why);
  if (!zl) {
    ob_error_set(err, OB_EINVAL, 0, "%s", why);
    return NULL;
  }
  ob_gzip *g = ob_xcalloc(1, sizeof *g);
  /* raw deflate (no zlib header: the gzip one is ob_gzip_head's), a 32 KB window */
  g->zl = zl;
  if (zl->deflate_init2(&g->z, 1, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                       (int)sizeof(z_stream)) != Z_OK) {
    free(g);
    ob_error_set(err, OB_ENOMEM, 0, "zlib could not make a compressor");
    return NULL;
  }
  return g;
}

void ob_gzip_free(ob_gzip *g) {
  if (!g)
    return;
  g->zl->deflate_end(&g->z);
  free(g);
}

int ob_gzip_piece(ob_gzip *g, const char *data, size_t len, ob_buf *out) {
  size_t was = out->len;
  g->z.next_in = (Bytef *)(uintptr_t)data;
  g->z.avail_in = 0;
  size_t left = len;
  for (;;) {
    if (!g->z.avail_in && left) { /* in steps a uInt can count */
      uInt n = left > (1u << 30) ? (1u << 30) : (uInt)left;
      g->z.avail_in = n;
      left -= n;
    }
    int flush = left ? Z_NO_FLUSH : Z_FULL_FLUSH;
    size_t room = 16384 + (g->z.avail_in >> 3);
    ob_buf_reserve(out, room);
    g->z.next_out = (Bytef *)out->data + out->len;
    g->z.avail_out = (uInt)room;
    int rc = g->zl->deflate(&g->z, flush);
    out->len += room - g->z.avail_out;
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      out->len = was;
      return -1;
    }
    /* a full flush is done when it left room unused: all is out, the piece ends */
    if (flush == Z_FULL_FLUSH && !g->z.avail_in && g->z.avail_out)
      return 0;
  }
}

/* A sum is of what a compressor made, so zlib is loaded; were it not (a compressor could
 * not be made, and the stream is ending), a sum is 0. */
void ob_gzip_sum_add(ob_gzip_sum *sum, ob_gzip_sum more) {
  const ob_zlib *zl = ob_zlib_get(NULL);
  sum->crc = zl ? (uint32_t)zl->crc32_combine(sum->crc, more.crc, (z_off_t)more.len) : 0;
  sum->len += more.len;
}

ob_gzip_sum ob_gzip_sum_of(const char *data, size_t len) {
  ob_gzip_sum s = {0, len};
  const ob_zlib *zl = ob_zlib_get(NULL);
  if (!zl)
    return s;
  uLong crc = zl->crc32(0, Z_NULL, 0);
  while (len) {
    uInt n = len > (1u << 30) ? (1u << 30) : (uInt)len;
    crc = zl->crc32(crc, (const Bytef *)data, n);
    data += n;
    len -= n;
  }
  s.crc = (uint32_t)crc;
  return s;
}

void ob_gzip_head(ob_buf *out) {
  /* magic, deflate, no flags, no time, no extra flags, OS unknown */
  static const char head[10] = {0x1f, (char)0x8b, 8, 0, 0, 0, 0, 0, 0, (char)0xff};
  ob_buf_add(out, head, sizeof head);
}

void ob_gzip_tail(ob_buf *out, ob_gzip_sum sum) {
  /* an empty last block of fixed codes: the bit 1 (last), the type 01, the end code
   * (seven zero bits), then zeros to the byte */
  char t[10] = {0x03, 0x00};
  for (int i = 0; i < 4; i++) {
    t[2 + i] = (char)(sum.crc >> (8 * i) & 0xff);
    t[6 + i] = (char)(sum.len >> (8 * i) & 0xff); /* the length mod 2^32 */
  }
  ob_buf_add(out, t, sizeof t);
}
