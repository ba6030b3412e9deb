/* ob_lws.h -- libwebsockets, loaded when the first HTTP server starts rather than when
 * the program starts (ob_lws.c tells why). ob_httpd.c is its one user: it includes this
 * header after <libwebsockets.h>, and the lws_* names it calls become the table's. */
#ifndef OB_LWS_H
#define OB_LWS_H

#include <libwebsockets.h>

#include "base/ob_error.h"

typedef struct ob_lws_api {
  void (*set_log_level)(int, void (*)(int, const char *));
  struct lws_context *(*create_context)(const struct lws_context_creation_info *);
  struct lws_vhost *(*get_vhost_by_name)(struct lws_context *, const char *);
  struct lws *(*adopt_socket_vhost)(struct lws_vhost *, lws_sockfd_type);
  void (*context_destroy)(struct lws_context *);
  void *(*context_user)(struct lws_context *);
  struct lws_context *(*get_context)(const struct lws *);
  int (*hdr_total_length)(struct lws *, enum lws_token_indexes);
  int (*hdr_copy)(struct lws *, char *, int, enum lws_token_indexes);
  int (*hdr_copy_fragment)(struct lws *, char *, int, enum lws_token_indexes, int);
  int (*callback_on_writable)(struct lws *);
  int (*add_http_common_headers)(struct lws *, unsigned int, const char *, lws_filepos_t,
                                 unsigned char **, unsigned char *);
  int (*add_http_header_by_name)(struct lws *, const unsigned char *, const unsigned char *, int,
                                 unsigned char **, unsigned char *);
  int (*finalize_write_http_header)(struct lws *, unsigned char *, unsigned char **,
                                    unsigned char *);
  int (*write)(struct lws *, unsigned char *, size_t, enum lws_write_protocol);
  int (*http_transaction_completed)(struct lws *);
  int (*callback_http_dummy)(struct lws *, enum lws_callback_reasons, void *, void *, size_t);
  int (*hdr_custom_length)(struct lws *, const char *, int);
  int (*hdr_custom_copy)(struct lws *, char *, int, const char *, int);
  void (*set_timeout)(struct lws *, enum pending_timeout, int);
} ob_lws_api;

/* The table, filled by ob_lws_load (valid once it returned OB_OK). */
extern ob_lws_api ob_lws;

/* Loads libwebsockets (once per process; any thread): OB_OK, or OB_EINVAL with err
 * saying which library or symbol is missing. */
int ob_lws_load(ob_error *err);

#ifndef OB_LWS_IMPL /* ob_httpd.c calls libwebsockets through the table */
#define lws_set_log_level ob_lws.set_log_level
#define lws_create_context ob_lws.create_context
#define lws_get_vhost_by_name ob_lws.get_vhost_by_name
#define lws_adopt_socket_vhost ob_lws.adopt_socket_vhost
#define lws_context_destroy ob_lws.context_destroy
#define lws_context_user ob_lws.context_user
#define lws_get_context ob_lws.get_context
#define lws_hdr_total_length ob_lws.hdr_total_length
#define lws_hdr_copy ob_lws.hdr_copy
#define lws_hdr_copy_fragment ob_lws.hdr_copy_fragment
#define lws_callback_on_writable ob_lws.callback_on_writable
#define lws_add_http_common_headers ob_lws.add_http_common_headers
#define lws_add_http_header_by_name ob_lws.add_http_header_by_name
#define lws_finalize_write_http_header ob_lws.finalize_write_http_header
#define lws_write ob_lws.write
#define lws_http_transaction_completed ob_lws.http_transaction_completed
#define lws_callback_http_dummy ob_lws.callback_http_dummy
#define lws_hdr_custom_length ob_lws.hdr_custom_length
#define lws_hdr_custom_copy ob_lws.hdr_custom_copy
#define lws_set_timeout ob_lws.set_timeout
#endif

#endif
