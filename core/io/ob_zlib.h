/* ob_zlib.h -- zlib, loaded when first needed: the table of its functions that obelus
 * calls (ob_zlib.c). ob_gzip.c (the ui's event streams) and ob_zdict.c (the fleet's
 * journal records) both compress through it. */
#ifndef OB_ZLIB_H
#define OB_ZLIB_H

#include <zlib.h>

typedef struct ob_zlib {
  int (*deflate_init2)(z_streamp, int, int, int, int, int, const char *, int);
  int (*deflate_set_dictionary)(z_streamp, const Bytef *, uInt);
  int (*deflate)(z_streamp, int);
  int (*deflate_end)(z_streamp);
  int (*inflate_init2)(z_streamp, int, const char *, int);
  int (*inflate_set_dictionary)(z_streamp, const Bytef *, uInt);
  int (*inflate)(z_streamp, int);
  int (*inflate_end)(z_streamp);
  uLong (*crc32)(uLong, const Bytef *, uInt);
  uLong (*crc32_combine)(uLong, uLong, z_off_t);
} ob_zlib;

/* The table, zlib loaded on the first call (from any thread; once for the process), or
 * NULL with *why saying which library or symbol is missing and what to install. */
const ob_zlib *ob_zlib_get(const char **why);

#endif
