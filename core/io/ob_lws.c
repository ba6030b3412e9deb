/* ob_lws.c -- libwebsockets, loaded with dlopen when the first HTTP server starts.
 *
 * Why not linked: libwebsockets brings OpenSSL (libssl, libcrypto), zlib and libcap,
 * and loading and relocating them nearly doubled what every `obelus run` costs
 * (farm-bench, a one-call plan as a whole process, 21 paired runs: 4 ms of CPU
 * before, 7 ms with it linked). Only `obelus ui` (and, later, MCP over HTTP) serves
 * HTTP: it loads the library once for the process, as ob_curl.c loads libcurl.
 *
 * The table is filled once (pthread_once); the names are checked against
 * <libwebsockets.h>'s prototypes by assigning each symbol to a pointer of its
 * function's type. libwebsockets.so.17 is the soname of Debian 12's libwebsockets17
 * (4.1); its libuv event library is a plugin the library itself loads
 * (libwebsockets-evlib_uv.so, package libwebsockets-evlib-uv). */
#define OB_LWS_IMPL
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "io/ob_dl.h"
#include "io/ob_lws.h"

ob_lws_api ob_lws;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256]; /* empty: loaded */

#define OB_LWS_SONAME "libwebsockets.so.17"

/* Each field of the table and the libwebsockets symbol it takes. */
#define OB_LWS_SYMBOLS(X)                                                            \
  X(set_log_level, lws_set_log_level)                                                \
  X(create_context, lws_create_context)                                              \
  X(get_vhost_by_name, lws_get_vhost_by_name)                                        \
  X(adopt_socket_vhost, lws_adopt_socket_vhost)                                      \
  X(context_destroy, lws_context_destroy)                                            \
  X(context_user, lws_context_user)                                                  \
  X(get_context, lws_get_context)                                                    \
  X(hdr_total_length, lws_hdr_total_length)                                          \
  X(hdr_copy, lws_hdr_copy)                                                          \
  X(hdr_copy_fragment, lws_hdr_copy_fragment)                                        \
  X(callback_on_writable, lws_callback_on_writable)                                  \
  X(add_http_common_headers, lws_add_http_common_headers)                            \
  X(add_http_header_by_name, lws_add_http_header_by_name)                            \
  X(finalize_write_http_header, lws_finalize_write_http_header)                      \
  X(write, lws_write)                                                                \
  X(http_transaction_completed, lws_http_transaction_completed)                      \
  X(callback_http_dummy, lws_callback_http_dummy)                                    \
  X(hdr_custom_length, lws_hdr_custom_length)                                        \
  X(hdr_custom_copy, lws_hdr_custom_copy)                                            \
  X(set_timeout, lws_set_timeout)

/* The prototypes agree: a compile-time check only (never called). */
static inline void check_types(void) {
#define OB_LWS_CHECK(field, sym) ob_lws.field = sym;
  OB_LWS_SYMBOLS(OB_LWS_CHECK)
#undef OB_LWS_CHECK
}

static void load(void) {
  (void)check_types;
  ob_lws_api t;
#define OB_LWS_NAME(field, sym) #sym,
#define OB_LWS_SLOT(field, sym) (void **)&t.field,
  static const char *const names[] = {OB_LWS_SYMBOLS(OB_LWS_NAME)};
  void **const slots[] = {OB_LWS_SYMBOLS(OB_LWS_SLOT)};
#undef OB_LWS_NAME
#undef OB_LWS_SLOT
  if (ob_dl_table(OB_LWS_SONAME, names, slots, sizeof names / sizeof *names, load_error,
                  sizeof load_error) == 0)
    ob_lws = t; /* the library stays loaded for the process */
  else /* what to install */
    snprintf(load_error + strlen(load_error), sizeof load_error - strlen(load_error),
             " (install libwebsockets17 and libwebsockets-evlib-uv)");
}

int ob_lws_load(ob_error *err) {
  pthread_once(&load_once, load);
  if (!load_error[0])
    return OB_OK;
  return ob_error_set(err, OB_EINVAL, 0, "%s", load_error);
}
