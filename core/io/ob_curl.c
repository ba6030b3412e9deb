/* ob_curl.c -- libcurl, loaded with dlopen when the first HTTP transfer is made.
 *
 * Why not linked: libcurl brings 32 more shared libraries (TLS, Kerberos, LDAP,
 * SSH, IDN, HTTP/2, ...), and loading and relocating them is most of what starting
 * the program costs. Measured with farm-bench on a one-call plan (`obelus run`, a
 * whole process): 7 ms with libcurl linked, against 2 ms before HTTP came in (issue
 * 11), most of the difference in the dynamic loader. A run that makes no HTTP
 * transfer never loads it now; the first obelus.http request, or a host's first
 * obelus_http_start, loads it once for the process (a few ms, then never again).
 *
 * The table is filled once (pthread_once: engines on several threads may ask at
 * once); the names are checked against <curl/curl.h>'s prototypes by assigning
 * each symbol to a pointer of its function's type. libcurl.so.4 is the soname
 * of every libcurl since 7.16 (Debian's libcurl4 package). */
#define OB_CURL_IMPL
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "io/ob_curl.h"
#include "io/ob_dl.h"

ob_curl_api ob_curl;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[256]; /* empty: loaded */

/* Each field of the table and the libcurl symbol it takes. */
#define OB_CURL_SYMBOLS(X)                                                           \
  X(global_init, curl_global_init)                                                   \
  X(easy_init, curl_easy_init)                                                       \
  X(easy_setopt, curl_easy_setopt)                                                   \
  X(easy_getinfo, curl_easy_getinfo)                                                 \
  X(easy_reset, curl_easy_reset)                                                     \
  X(easy_cleanup, curl_easy_cleanup)                                                 \
  X(easy_strerror, curl_easy_strerror)                                               \
  X(multi_init, curl_multi_init)                                                     \
  X(multi_setopt, curl_multi_setopt)                                                 \
  X(multi_add_handle, curl_multi_add_handle)                                         \
  X(multi_remove_handle, curl_multi_remove_handle)                                   \
  X(multi_assign, curl_multi_assign)                                                 \
  X(multi_socket_action, curl_multi_socket_action)                                   \
  X(multi_info_read, curl_multi_info_read)                                           \
  X(multi_cleanup, curl_multi_cleanup)                                               \
  X(share_init, curl_share_init)                                                     \
  X(share_setopt, curl_share_setopt)                                                 \
  X(share_cleanup, curl_share_cleanup)                                               \
  X(slist_append, curl_slist_append)                                                 \
  X(slist_free_all, curl_slist_free_all)

/* The prototypes agree: a compile-time check only (never called). */
static inline void check_types(void) {
#define OB_CURL_CHECK(field, sym) ob_curl.field = sym;
  OB_CURL_SYMBOLS(OB_CURL_CHECK)
#undef OB_CURL_CHECK
}

static void load(void) {
  (void)check_types;
  ob_curl_api t;
#define OB_CURL_NAME(field, sym) #sym,
#define OB_CURL_SLOT(field, sym) (void **)&t.field,
  static const char *const names[] = {OB_CURL_SYMBOLS(OB_CURL_NAME)};
  void **const slots[] = {OB_CURL_SYMBOLS(OB_CURL_SLOT)};
#undef OB_CURL_NAME
#undef OB_CURL_SLOT
  if (ob_dl_table("libcurl.so.4", names, slots, sizeof names / sizeof *names, load_error,
                  sizeof load_error) == 0)
    ob_curl = t; /* the library stays loaded for the process */
}

int ob_curl_load(ob_error *err) {
  pthread_once(&load_once, load);
  if (!load_error[0])
    return OB_OK;
  ob_error_set(err, OB_EINVAL, 0, "http: %s", load_error);
  return OB_EINVAL;
}
