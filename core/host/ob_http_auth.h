/* ob_http_auth.h -- who may ask a server of the engine's (ob_http_auth.c): the rules
 * `obelus ui` and `obelus mcp --http` share. A server listens on a loopback address
 * unless told otherwise, and any other address needs a token (one is made when none is
 * given); with a token every request carries it ("Authorization: Bearer T", the cookie
 * obelus_token=T, or ?token=T, which sets that cookie), compared in a time that does
 * not tell where it differs; a request from a web page (an Origin header) is taken only
 * from an origin of this machine or of the server's own address, never from a name a
 * DNS answer could point here (DNS rebinding). */
#ifndef OB_HTTP_AUTH_H
#define OB_HTTP_AUTH_H

#include <stddef.h>

#include "io/ob_httpd.h"

/* 1 when addr names this machine only: 127.0.0.0/8, ::1, localhost. */
int ob_http_auth_loopback(const char *addr);

/* 1 when secret equals s (len bytes), in a time that depends on len only. */
int ob_http_auth_same(const char *secret, const char *s, size_t len);

/* The value of name in a list "a=1; b=2" (sep ';', a Cookie header) or "a=1&b=2" (sep
 * '&', a URL's arguments), as sent (not decoded): a pointer into list and its *len, or
 * NULL when it has none. */
const char *ob_http_auth_find(const char *list, const char *name, char sep, size_t *len);

/* 1 when req carries token (always, when token is NULL): as a Bearer header, the cookie,
 * or ?token=, which also sets the cookie (a header line written into res->extra). */
int ob_http_auth_token(const char *token, const ob_httpd_req *req, ob_httpd_res *res);

/* 1 when req may come from the web page it says (its Origin header): it has none (not a
 * browser's), or its origin's host is a loopback one (localhost, 127.x.x.x, [::1]),
 * or the server listens on an address other than loopback and that host is an IP
 * address (not a name) equal to bind or to the host the request was sent to (its Host
 * header). A name other than localhost is refused: a page of any site can have its name
 * point at this server. bind: the address the server listens on. */
int ob_http_auth_origin(const ob_httpd_req *req, const char *bind);

/* A token of 128 random bits, as 32 hex digits and a NUL, from the kernel (getrandom):
 * 0, or -1 when none could be had. */
int ob_http_auth_make_token(char out[33]);

#endif
