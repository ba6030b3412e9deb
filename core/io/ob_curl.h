/* ob_curl.h -- libcurl, loaded when the first HTTP transfer is made rather than
 * when the program starts (ob_curl.c tells why). ob_http.c is its one user: it
 * includes this header after <curl/curl.h>, and the curl_* names it calls become
 * the table's pointers. */
#ifndef OB_CURL_H
#define OB_CURL_H

#include <curl/curl.h>

#include "base/ob_error.h"

typedef struct ob_curl_api {
  CURLcode (*global_init)(long flags);
  CURL *(*easy_init)(void);
  CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
  CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
  void (*easy_reset)(CURL *);
  void (*easy_cleanup)(CURL *);
  const char *(*easy_strerror)(CURLcode);
  CURLM *(*multi_init)(void);
  CURLMcode (*multi_setopt)(CURLM *, CURLMoption, ...);
  CURLMcode (*multi_add_handle)(CURLM *, CURL *);
  CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
  CURLMcode (*multi_assign)(CURLM *, curl_socket_t, void *);
  CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
  CURLMsg *(*multi_info_read)(CURLM *, int *);
  CURLMcode (*multi_cleanup)(CURLM *);
  CURLSH *(*share_init)(void);
  CURLSHcode (*share_setopt)(CURLSH *, CURLSHoption, ...);
  CURLSHcode (*share_cleanup)(CURLSH *);
  struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
  void (*slist_free_all)(struct curl_slist *);
} ob_curl_api;

/* The table, filled by ob_curl_load (valid once it returned OB_OK). */
extern ob_curl_api ob_curl;

/* Loads libcurl (once per process; any thread): OB_OK, or OB_EINVAL with err
 * saying which library or symbol is missing. */
int ob_curl_load(ob_error *err);

#ifndef OB_CURL_IMPL /* ob_http.c calls libcurl through the table (curl.h's type-checking
                        wrappers of the variadic setters go: the table's types stand) */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#undef curl_share_setopt
#define curl_global_init ob_curl.global_init
#define curl_easy_init ob_curl.easy_init
#define curl_easy_setopt ob_curl.easy_setopt
#define curl_easy_getinfo ob_curl.easy_getinfo
#define curl_easy_reset ob_curl.easy_reset
#define curl_easy_cleanup ob_curl.easy_cleanup
#define curl_easy_strerror ob_curl.easy_strerror
#define curl_multi_init ob_curl.multi_init
#define curl_multi_setopt ob_curl.multi_setopt
#define curl_multi_add_handle ob_curl.multi_add_handle
#define curl_multi_remove_handle ob_curl.multi_remove_handle
#define curl_multi_assign ob_curl.multi_assign
#define curl_multi_socket_action ob_curl.multi_socket_action
#define curl_multi_info_read ob_curl.multi_info_read
#define curl_multi_cleanup ob_curl.multi_cleanup
#define curl_share_init ob_curl.share_init
#define curl_share_setopt ob_curl.share_setopt
#define curl_share_cleanup ob_curl.share_cleanup
#define curl_slist_append ob_curl.slist_append
#define curl_slist_free_all ob_curl.slist_free_all
#endif

#endif
