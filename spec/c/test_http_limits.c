/* test_http_limits.c -- what ob_http.c refuses and the limits it sets, without a
 * server: a request left at 0 gets the default timeout (300 s), low-speed abort
 * (1 byte/s for 60 s), body limit (64 MB, or the client's) and redirect bound, as
 * handed to libcurl; a method or header name that is not a token, a header value
 * with CR or LF, a URL not http(s) or with a space or control byte are refused,
 * quoted with their control bytes escaped; the deny list holds link-local,
 * metadata, unspecified, multicast and reserved addresses, IPv4 inside IPv6 too,
 * and lets loopback and private networks through. (The transfers themselves,
 * against a real server: spec/cli/http_hostile_spec.lua.) */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <uv.h>

#include "io/ob_http.h"
#include "test.h"

TEST(a_request_left_at_0_gets_the_default_limits) {
  ob_http_request rq = {.url = "http://127.0.0.1/"};
  ob_http_settings s;
  ob_http_settings_of(NULL, &rq, &s);
  CHECK_INT(s.timeout_ms, 300000);
  CHECK_INT(s.low_speed_limit, 1);
  CHECK_INT(s.low_speed_time, 60);
  CHECK_INT(s.max_bytes, 64 << 20);
  CHECK_INT(s.max_redirects, 20);
  CHECK_INT(s.allow_private, 0);
  rq.timeout_ms = 1500;
  rq.low_speed_limit = 100;
  rq.low_speed_time = 2;
  rq.max_bytes = 1000;
  ob_http_settings_of(NULL, &rq, &s);
  CHECK_INT(s.timeout_ms, 1500);
  CHECK_INT(s.low_speed_limit, 100);
  CHECK_INT(s.low_speed_time, 2);
  CHECK_INT(s.max_bytes, 1000);
}

TEST(the_clients_body_limit_and_private_switch_apply_to_requests_without_their_own) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  ob_error err;
  ob_http *h = ob_http_new(&loop, &err);
  CHECK(h != NULL);
  if (!h)
    return;
  ob_http_request rq = {.url = "http://127.0.0.1/"};
  ob_http_settings s;
  ob_http_settings_of(h, &rq, &s);
  CHECK_INT(s.max_bytes, 64 << 20);
  CHECK_INT(s.allow_private, 0);
  ob_http_set_max_bytes(h, 12345);
  ob_http_set_allow_private(h, 1);
  ob_http_settings_of(h, &rq, &s);
  CHECK_INT(s.max_bytes, 12345);
  CHECK_INT(s.allow_private, 1);
  rq.max_bytes = 99;
  ob_http_settings_of(h, &rq, &s);
  CHECK_INT(s.max_bytes, 99);
  ob_http_set_max_bytes(h, 0); /* back to the default */
  rq.max_bytes = 0;
  ob_http_settings_of(h, &rq, &s);
  CHECK_INT(s.max_bytes, 64 << 20);
  ob_http_free(h);
  uv_run(&loop, UV_RUN_DEFAULT);
  uv_loop_close(&loop);
}

static int refused(const char *method, const char *url, const char *header, const char *want) {
  const char *hs[1] = {header};
  ob_http_request rq = {.method = method, .url = url, .headers = hs, .nheaders = header != NULL};
  ob_error err;
  if (ob_http_check(&rq, &err) == OB_OK)
    return 0;
  if (!strstr(err.msg, want)) {
    fprintf(stderr, "  got \"%s\", wanted \"%s\" in it\n", err.msg, want);
    return 0;
  }
  return !strchr(err.msg, '\r') && !strchr(err.msg, '\n'); /* escaped, never raw */
}

static int accepted(const char *method, const char *url, const char *header) {
  const char *hs[1] = {header};
  ob_http_request rq = {.method = method, .url = url, .headers = hs, .nheaders = header != NULL};
  ob_error err;
  return ob_http_check(&rq, &err) == OB_OK;
}

TEST(a_method_header_or_url_that_could_split_the_request_is_refused) {
  const char *u = "http://127.0.0.1:1/x";
  CHECK(accepted(NULL, u, NULL));
  CHECK(accepted("PATCH", "HTTPS://example.com/a?b=c%20d", "X-Trace: t-1"));
  CHECK(accepted("M-SEARCH", u, "Empty;"));
  CHECK(refused("GET /other HTTP/1.1\r\nX-Injected: 1\r\n\r\nGET", u, NULL,
                "method \"GET /other HTTP/1.1\\r\\nX-Injected: 1\\r\\n\\r\\nGET\" is not an HTTP"));
  CHECK(refused("GET ", u, NULL, "is not an HTTP method"));
  CHECK(refused("", u, NULL, "is not an HTTP method"));
  CHECK(refused("G\x1b[31mET", u, NULL, "\"G\\x1b[31mET\""));
  CHECK(refused("GET", u, "X-A: 1\r\nX-Injected: 2", "header \"X-A\": its value has a line break"));
  CHECK(refused("GET", u, "X-A: 1\n", "its value has a line break"));
  CHECK(refused("GET", u, "X A: 1", "header \"X A\": its name is not an HTTP token"));
  CHECK(refused("GET", u, ": 1", "its name is not an HTTP token"));
  CHECK(refused("GET", u, "NoColon", "its name is not an HTTP token"));
  CHECK(refused("GET", "ftp://127.0.0.1/x", NULL, "only http:// and https:// URLs"));
  CHECK(refused("GET", "file:///etc/passwd", NULL, "only http:// and https:// URLs"));
  CHECK(refused("GET", "127.0.0.1/x", NULL, "only http:// and https:// URLs"));
  CHECK(refused("GET", "http://127.0.0.1/a b", NULL, "no space, line break or control byte"));
  CHECK(refused("GET", "http://127.0.0.1/\r\nX-Injected: 1", NULL, "\\r\\nX-Injected"));
  CHECK(refused("GET", "", NULL, "no url"));
}

static const char *denied(const char *ip) {
  struct sockaddr_storage ss = {0};
  if (strchr(ip, ':')) {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    CHECK(inet_pton(AF_INET6, ip, &a->sin6_addr) == 1);
  } else {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    CHECK(inet_pton(AF_INET, ip, &a->sin_addr) == 1);
  }
  return ob_http_denied(&ss);
}

TEST(link_local_metadata_and_unspecified_addresses_are_denied_loopback_and_private_are_not) {
  const char *deny[] = {"169.254.169.254", "169.254.0.1", "169.254.170.2", "100.100.100.200",
                        "0.0.0.0", "0.1.2.3", "224.0.0.1", "239.255.255.250", "240.0.0.1",
                        "255.255.255.255", "::", "fe80::1", "febf::1", "fd00:ec2::254",
                        "ff02::1", "::ffff:169.254.169.254", "::ffff:0.0.0.0",
                        "64:ff9b::a9fe:a9fe", "::169.254.169.254"};
  for (size_t i = 0; i < sizeof deny / sizeof *deny; i++)
    if (!denied(deny[i])) {
      fprintf(stderr, "  %s was let through\n", deny[i]);
      CHECK(0);
    }
  CHECK(strstr(denied("169.254.169.254"), "link-local") != NULL);
  CHECK(strstr(denied("100.100.100.200"), "metadata") != NULL);
  const char *allow[] = {"127.0.0.1", "127.1.2.3", "::1", "10.0.0.1", "172.16.0.1",
                         "192.168.1.1", "100.64.0.1", "100.100.100.201", "8.8.8.8",
                         "169.253.255.255", "169.255.0.1", "fc00::1", "fd00:ec2::253",
                         "fec0::1", "2001:db8::1", "::ffff:127.0.0.1", "::ffff:8.8.8.8"};
  for (size_t i = 0; i < sizeof allow / sizeof *allow; i++)
    if (denied(allow[i])) {
      fprintf(stderr, "  %s was denied: %s\n", allow[i], denied(allow[i]));
      CHECK(0);
    }
}

int main(void) {
  RUN(a_request_left_at_0_gets_the_default_limits);
  RUN(the_clients_body_limit_and_private_switch_apply_to_requests_without_their_own);
  RUN(a_method_header_or_url_that_could_split_the_request_is_refused);
  RUN(link_local_metadata_and_unspecified_addresses_are_denied_loopback_and_private_are_not);
  return TEST_END();
}
