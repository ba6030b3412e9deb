/* ob_http_auth.c -- the rules of who may ask a server of the engine's (ob_http_auth.h).
 *
 * The token: compared byte by byte over the whole of what was sent, the differences
 * or'ed together, so that the time taken says nothing of where a guess goes wrong; it
 * may come as a header (scripts, MCP clients), a cookie (a browser, once ?token= has
 * set it), or ?token= (a link). Origins: a host is taken from "scheme://host[:port]"
 * ("[v6]" unbracketed), compared without regard to case; "null" and anything else
 * unparsable is refused. The token is 16 bytes of getrandom as hex.
 *
 * Costs: each check is linear in the header it reads; nothing is kept. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "host/ob_http_auth.h"

int ob_http_auth_loopback(const char *addr) {
  return !strcmp(addr, "127.0.0.1") || !strcmp(addr, "::1") || !strcasecmp(addr, "localhost") ||
         !strncmp(addr, "127.", 4);
}

int ob_http_auth_same(const char *secret, const char *s, size_t len) {
  size_t n = strlen(secret);
  unsigned diff = (unsigned)(n ^ len);
  for (size_t i = 0; i < len; i++)
    diff |= (unsigned char)(s[i] ^ secret[i < n ? i : 0]);
  return diff == 0;
}

const char *ob_http_auth_find(const char *s, const char *name, char sep, size_t *len) {
  size_t n = strlen(name);
  while (s && *s) {
    while (*s == ' ' || *s == sep)
      s++;
    const char *end = strchr(s, sep);
    size_t l = end ? (size_t)(end - s) : strlen(s);
    if (l > n && !strncmp(s, name, n) && s[n] == '=') {
      *len = l - n - 1;
      return s + n + 1;
    }
    s = end;
  }
  return NULL;
}

int ob_http_auth_token(const char *token, const ob_httpd_req *req, ob_httpd_res *res) {
  if (!token)
    return 1;
  size_t len;
  const char *v;
  if (req->auth && !strncmp(req->auth, "Bearer ", 7) &&
      ob_http_auth_same(token, req->auth + 7, strlen(req->auth + 7)))
    return 1;
  if ((v = ob_http_auth_find(req->cookie, "obelus_token", ';', &len)) && ob_http_auth_same(token, v, len))
    return 1;
  if ((v = ob_http_auth_find(req->query, "token", '&', &len)) && ob_http_auth_same(token, v, len)) {
    size_t used = strlen(res->extra);
    snprintf(res->extra + used, sizeof res->extra - used,
             "Set-Cookie: obelus_token=%s; HttpOnly; SameSite=Strict; Path=/\r\n", token);
    return 1;
  }
  return 0;
}

/* The host of "host[:port]" or "[v6][:port]" (from s, up to end) into out: 0, or -1
 * when it does not fit or is empty. */
static int host_of(const char *s, const char *end, char *out, size_t size) {
  const char *h = s, *e;
  if (*s == '[') {
    h = s + 1;
    e = memchr(h, ']', (size_t)(end - h));
    if (!e || (e + 1 != end && e[1] != ':'))
      return -1;
  } else {
    e = memchr(s, ':', (size_t)(end - s));
    if (!e)
      e = end;
  }
  size_t n = (size_t)(e - h);
  if (!n || n >= size)
    return -1;
  memcpy(out, h, n);
  out[n] = '\0';
  return 0;
}

static int is_ip(const char *host) {
  unsigned char a[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

int ob_http_auth_origin(const ob_httpd_req *req, const char *bind) {
  const char *o = req->origin;
  if (!o)
    return 1; /* not a browser's: the token (when there is one) is the guard */
  if (!strncasecmp(o, "http://", 7))
    o += 7;
  else if (!strncasecmp(o, "https://", 8))
    o += 8;
  else
    return 0; /* "null" (a file, a sandboxed frame), or not an origin */
  char host[256];
  if (host_of(o, o + strlen(o), host, sizeof host) < 0)
    return 0;
  if (ob_http_auth_loopback(host))
    return 1;
  if (!bind || ob_http_auth_loopback(bind) || !is_ip(host))
    return 0;
  if (!strcasecmp(host, bind))
    return 1;
  char hh[300], sent[256];
  int n = ob_httpd_header(req, "host", hh, sizeof hh);
  return n > 0 && host_of(hh, hh + n, sent, sizeof sent) == 0 && !strcasecmp(host, sent);
}

int ob_http_auth_make_token(char out[33]) {
  unsigned char r[16];
  if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r)
    return -1;
  for (size_t i = 0; i < sizeof r; i++)
    snprintf(out + 2 * i, 3, "%02x", r[i]);
  return 0;
}
