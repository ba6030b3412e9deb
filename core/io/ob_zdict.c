/* ob_zdict.c -- raw deflate with a preset dictionary, one call each way (ob_zdict.h).
 *
 * A text of a few hundred bytes hardly compresses on its own: deflate has nothing yet
 * to point back to. With a dictionary, the bytes both sides already have (what every
 * such text says, and the text it repeats), it points back into those from its first
 * byte: a trivial job's journal of 610 bytes is about 100 once compressed against
 * journal boilerplate and its own plan (fleet/ob_queue_journal.c).
 *
 * zlib is loaded when first used (ob_zlib.h), as for ob_gzip.c: a process that
 * never compresses a journal never maps it. Each call makes its own stream, so calls
 * from any thread are independent; a stream is about 270 KB to deflate (level 9,
 * memLevel 9) and 40 KB to inflate, freed before returning.
 *
 * Costs: deflate, about 20 MB/s at level 9 on journals (a trivial job's, some 30 us);
 * inflate, a few hundred MB/s. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#include "io/ob_zdict.h"
#include "io/ob_zlib.h"

/* zlib's table, or NULL with err set */
static const ob_zlib *loaded(ob_error *err) {
  const char *why = NULL;
  const ob_zlib *zl = ob_zlib_get(&why);
  if (!zl)
    ob_error_set(err, OB_EIO, 0, "%s", why);
  return zl;
}

/* The window holds 32 KB: a longer dictionary's last 32 KB are what count. */
static void dict_tail(const char **dict, size_t *dlen) {
  if (*dlen > 32768) {
    *dict += *dlen - 32768;
    *dlen = 32768;
  }
}

int ob_zdict_deflate(const char *dict, size_t dlen, const char *data, size_t len, int level,
                     ob_buf *out, ob_error *err) {
  const ob_zlib *zl = loaded(err);
  if (!zl)
    return OB_EIO;
  z_stream z;
  memset(&z, 0, sizeof z);
  if (zl->deflate_init2(&z, level, Z_DEFLATED, -15, 9, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
                       (int)sizeof z) != Z_OK) {
    ob_error_set(err, OB_ENOMEM, 0, "zlib could not make a compressor");
    return OB_ENOMEM;
  }
  dict_tail(&dict, &dlen);
  if (dlen)
    zl->deflate_set_dictionary(&z, (const Bytef *)dict, (uInt)dlen);
  size_t was = out->len, left = len;
  z.next_in = (Bytef *)(uintptr_t)data;
  int rc;
  do {
    if (!z.avail_in && left) { /* in steps a uInt can count */
      uInt n = left > (1u << 30) ? (1u << 30) : (uInt)left;
      z.avail_in = n;
      left -= n;
    }
    size_t room = 4096 + (z.avail_in >> 2);
    ob_buf_reserve(out, room);
    z.next_out = (Bytef *)out->data + out->len;
    z.avail_out = (uInt)room;
    rc = zl->deflate(&z, left ? Z_NO_FLUSH : Z_FINISH);
    out->len += room - z.avail_out;
  } while (rc == Z_OK || rc == Z_BUF_ERROR);
  zl->deflate_end(&z);
  if (rc != Z_STREAM_END) {
    out->len = was;
    ob_error_set(err, OB_ENOMEM, 0, "zlib could not compress (%d)", rc);
    return OB_ENOMEM;
  }
  return OB_OK;
}

int ob_zdict_inflate(const char *dict, size_t dlen, const char *data, size_t len, size_t max,
                     ob_buf *out, ob_error *err) {
  const ob_zlib *zl = loaded(err);
  if (!zl)
    return OB_EIO;
  z_stream z;
  memset(&z, 0, sizeof z);
  if (zl->inflate_init2(&z, -15, ZLIB_VERSION, (int)sizeof z) != Z_OK) {
    ob_error_set(err, OB_ENOMEM, 0, "zlib could not make a decompressor");
    return OB_ENOMEM;
  }
  dict_tail(&dict, &dlen);
  /* raw inflate takes its dictionary at once (no header asks for it) */
  if (dlen && zl->inflate_set_dictionary(&z, (const Bytef *)dict, (uInt)dlen) != Z_OK) {
    zl->inflate_end(&z);
    ob_error_set(err, OB_ENOMEM, 0, "zlib refused the dictionary");
    return OB_ENOMEM;
  }
  size_t was = out->len, left = len;
  z.next_in = (Bytef *)(uintptr_t)data;
  int rc = Z_OK;
  for (;;) {
    if (!z.avail_in && left) {
      uInt n = left > (1u << 30) ? (1u << 30) : (uInt)left;
      z.avail_in = n;
      left -= n;
    }
    size_t room = 16384 + (size_t)z.avail_in * 4;
    if (out->len - was + room > max + 1) /* one byte past max says "more" */
      room = max + 1 - (out->len - was);
    ob_buf_reserve(out, room);
    z.next_out = (Bytef *)out->data + out->len;
    z.avail_out = (uInt)room;
    rc = zl->inflate(&z, Z_NO_FLUSH);
    out->len += room - z.avail_out;
    if (rc == Z_STREAM_END || out->len - was > max)
      break;
    if (rc != Z_OK && !(rc == Z_BUF_ERROR && z.avail_out == 0))
      break; /* a corrupt stream, or one that stops short (Z_BUF_ERROR with input spent) */
  }
  int trailing = rc == Z_STREAM_END && (z.avail_in || left); /* bytes after its end */
  zl->inflate_end(&z);
  if (out->len - was > max) {
    out->len = was;
    ob_error_set(err, OB_ENOMEM, 0, "it inflates past %zu bytes", max);
    return OB_ENOMEM;
  }
  if (rc != Z_STREAM_END || trailing) {
    out->len = was;
    ob_error_set(err, OB_EINVAL, 0, "%s", rc == Z_NEED_DICT || rc == Z_DATA_ERROR
                                              ? "not a deflate stream of this dictionary"
                                          : trailing ? "bytes follow its end"
                                                     : "it stops short");
    return OB_EINVAL;
  }
  return OB_OK;
}
