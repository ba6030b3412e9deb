/* ob_dl.h -- a shared library loaded when first needed, its functions into a table
 * (ob_dl.c): what ob_curl.c (libcurl) and ob_lws.c (libwebsockets) both do. */
#ifndef OB_DL_H
#define OB_DL_H

#include <stddef.h>

/* Opens soname (it stays loaded for the process) and sets *slots[i] to the address of
 * symbol names[i], for i < n. 0, or -1 with why (of size whylen) saying which library
 * could not be loaded or which symbol it lacks; the slots are then not all set. */
int ob_dl_table(const char *soname, const char *const *names, void **const *slots, size_t n,
                char *why, size_t whylen);

#endif
