/* test_api_http.c -- HTTP from C through the public API, against the tests' own server
 * (spec/support/httpd.lua, started here on a free port): a C tool that calls an API and
 * completes its call from the answer; a host's own request; a status as data; a transport
 * failure named; a transfer cancelled (its callback never comes); an engine freed with a
 * transfer in flight (no callback, nothing leaked: ASan); a method or header that could
 * split the request refused, the engine's body limit and deny list (issue 26). */
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include "obelus.h"
#include "test.h"

#define D "\xE2\x80\xA0"

static char base[64];
static pid_t server;

static void start_server(void) {
  char dir[] = "/tmp/obelus-http-XXXXXX", portfile[64];
  if (!mkdtemp(dir))
    return;
  snprintf(portfile, sizeof portfile, "%s/port", dir);
  server = fork();
  if (server == 0) {
    execlp("lua5.4", "lua5.4", "spec/support/httpd.lua", portfile, (char *)NULL);
    _exit(127);
  }
  for (int i = 0; i < 250; i++) {
    FILE *f = fopen(portfile, "r");
    int port = 0;
    if (f && fscanf(f, "%d", &port) == 1 && port > 0) {
      fclose(f);
      snprintf(base, sizeof base, "http://127.0.0.1:%d", port);
      unlink(portfile);
      rmdir(dir);
      return;
    }
    if (f)
      fclose(f);
    usleep(20000);
  }
}

/* --- a C tool that GETs params.path and completes with the body --- */

static void tool_answered(const obelus_http_response *res, void *data) {
  obelus_call *call = data;
  if (res->error) {
    obelus_call_fail(call, res->error);
    return;
  }
  char out[256];
  snprintf(out, sizeof out, "{\"status\":%ld,\"body\":\"%.*s\"}", res->status, (int)res->body_len,
           res->body);
  CHECK_INT(obelus_call_complete(call, out), OBELUS_OK);
}

static void fetch(obelus_call *call, const char *params, void *data) {
  obelus_engine *e = data;
  char url[256] = "";
  const char *p = strstr(params, "\"path\":\"");
  if (p)
    snprintf(url, sizeof url, "%s%.*s", base, (int)strcspn(p + 8, "\""), p + 8);
  obelus_http_request rq = {0};
  rq.url = url;
  if (obelus_http_start(e, &rq, tool_answered, call, NULL) != OBELUS_OK)
    obelus_call_fail(call, obelus_engine_errmsg(e));
}

typedef struct result {
  int done, status;
  char output[512];
} result;

static void on_done(obelus_run *run, int status, const char *output, void *data) {
  (void)run;
  result *r = data;
  r->done = 1;
  r->status = status;
  snprintf(r->output, sizeof r->output, "%s", output);
}

TEST(a_c_tool_calls_an_api_and_completes_from_the_answer) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  CHECK_INT(obelus_engine_add_tool(e, "fetch", NULL, fetch, e), OBELUS_OK);
  result r = {0};
  obelus_run_options opt = {0};
  opt.on_done = on_done;
  opt.data = &r;
  obelus_run *run;
  CHECK_INT(obelus_run_new(e, &run,
                           "{\"plan\":["
                           "{\"_tool\":\"fetch\",\"path\":\"/hello\",\"_outputPath\":\"" D "state.a\"},"
                           "{\"_tool\":\"fetch\",\"path\":\"/status/503\",\"_outputPath\":\"" D "state.b\"}]}",
                           &opt),
            OBELUS_OK);
  CHECK_INT(obelus_run_start(run), OBELUS_OK);
  obelus_run_wait(run);
  CHECK_INT(r.status, 0);
  CHECK_STR(r.output, "{\"a\":{\"status\":200,\"body\":\"hello\"},\"b\":{\"status\":503,"
                      "\"body\":\"status 503\"}}");
  obelus_run_free(run);
  obelus_engine_free(e);
}

/* --- the host's own requests --- */

static int answers;
static long last_status;
static char last_error[256], last_type[64];

static void host_answered(const obelus_http_response *res, void *data) {
  (void)data;
  answers++;
  last_status = res->status;
  snprintf(last_error, sizeof last_error, "%s", res->error ? res->error : "");
  last_type[0] = 0;
  for (size_t i = 0; i < res->nheaders; i++)
    if (!strcmp(res->names[i], "content-type"))
      snprintf(last_type, sizeof last_type, "%s", res->values[i]);
}

static void turn_until(obelus_engine *e, int n) {
  while (answers < n && uv_run(obelus_engine_loop(e), UV_RUN_ONCE))
    ;
}

TEST(a_host_requests_cancels_and_frees_with_transfers_in_flight) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  char url[128];
  obelus_http_request rq = {0};
  rq.url = url;
  answers = 0;
  snprintf(url, sizeof url, "%s/json", base);
  CHECK_INT(obelus_http_start(e, &rq, host_answered, NULL, NULL), OBELUS_OK);
  turn_until(e, 1);
  CHECK_INT(answers, 1);
  CHECK_INT((int)last_status, 200);
  CHECK_STR(last_type, "application/json");
  /* a transport failure: named, with the method and the URL */
  snprintf(url, sizeof url, "%s/broken", base);
  CHECK_INT(obelus_http_start(e, &rq, host_answered, NULL, NULL), OBELUS_OK);
  turn_until(e, 2);
  CHECK(strncmp(last_error, "GET http://127.0.0.1:", 21) == 0);
  CHECK(strstr(last_error, "/broken: ") != NULL);
  /* cancelled: its callback never comes, and nothing is left on the loop */
  snprintf(url, sizeof url, "%s/slow?ms=3000", base);
  obelus_http *x;
  CHECK_INT(obelus_http_start(e, &rq, host_answered, NULL, &x), OBELUS_OK);
  uv_run(obelus_engine_loop(e), UV_RUN_NOWAIT);
  obelus_http_cancel(x);
  uint64_t t0 = uv_hrtime();
  while (uv_run(obelus_engine_loop(e), UV_RUN_ONCE))
    ;
  CHECK(uv_hrtime() - t0 < 2000000000ull);
  CHECK_INT(answers, 2);
  /* no url: refused */
  rq.url = NULL;
  CHECK_INT(obelus_http_start(e, &rq, host_answered, NULL, NULL), OBELUS_EINVAL);
  /* the engine freed with one in flight: no callback, nothing leaked */
  rq.url = url;
  CHECK_INT(obelus_http_start(e, &rq, host_answered, NULL, NULL), OBELUS_OK);
  uv_run(obelus_engine_loop(e), UV_RUN_NOWAIT);
  obelus_engine_free(e);
  CHECK_INT(answers, 2);
}

static char last_body[128];
static void body_answered(const obelus_http_response *res, void *data) {
  (void)data;
  answers++;
  snprintf(last_body, sizeof last_body, "%.*s", (int)res->body_len, res->body ? res->body : "");
}

TEST(http_max_holds_the_transfers_at_once) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  obelus_engine_set_http_max(e, 1);
  char url[128];
  obelus_http_request rq = {0};
  rq.url = url;
  answers = 0;
  snprintf(url, sizeof url, "%s/hold?n=1&tag=c1", base);
  for (int i = 0; i < 3; i++)
    CHECK_INT(obelus_http_start(e, &rq, body_answered, NULL, NULL), OBELUS_OK);
  turn_until(e, 3);
  snprintf(url, sizeof url, "%s/peak?tag=c1", base);
  CHECK_INT(obelus_http_start(e, &rq, body_answered, NULL, NULL), OBELUS_OK);
  turn_until(e, 4);
  CHECK_STR(last_body, "{\"peak\":1}");
  obelus_engine_free(e);
}

/* issue 26: what a host's request may not carry, and the engine's HTTP limits */
TEST(a_host_request_that_could_split_is_refused_and_the_engines_limits_hold) {
  obelus_engine *e;
  CHECK_INT(obelus_engine_new(&e, NULL), OBELUS_OK);
  char url[128];
  obelus_http_request rq = {0};
  rq.url = url;
  answers = 0;
  snprintf(url, sizeof url, "%s/echo", base);
  rq.method = "GET /x HTTP/1.1\r\nX-Injected: 1\r\n\r\nGET";
  CHECK_INT(obelus_http_start(e, &rq, host_answered, NULL, NULL), OBELUS_EINVAL);
  CHECK(strstr(obelus_engine_errmsg(e), "is not an HTTP method") != NULL);
  rq.method = NULL;
  const char *bad[] = {"X-A: 1\r\nX-Injected: 2"};
  rq.headers = bad;
  rq.nheaders = 1;
  CHECK_INT(obelus_http_start(e, &rq, host_answered, NULL, NULL), OBELUS_EINVAL);
  CHECK(strstr(obelus_engine_errmsg(e), "header \"X-A\": its value has a line break") != NULL);
  rq.headers = NULL;
  rq.nheaders = 0;
  /* the engine's body limit, for requests without their own */
  obelus_engine_set_http_max_bytes(e, 1000);
  snprintf(url, sizeof url, "%s/big?n=5000", base);
  CHECK_INT(obelus_http_start(e, &rq, host_answered, NULL, NULL), OBELUS_OK);
  turn_until(e, 1);
  CHECK(strstr(last_error, "response body larger than 1000 bytes (max_bytes)") != NULL);
  /* 0.0.0.0 (Linux connects it to loopback) is denied, unless allowed */
  snprintf(url, sizeof url, "http://0.0.0.0:%s/hello", strrchr(base, ':') + 1);
  CHECK_INT(obelus_http_start(e, &rq, host_answered, NULL, NULL), OBELUS_OK);
  turn_until(e, 2);
  CHECK(strstr(last_error, "0.0.0.0 is an unspecified (0.0.0.0/8) address, denied") != NULL);
  obelus_engine_set_http_allow_private(e, 1);
  CHECK_INT(obelus_http_start(e, &rq, host_answered, NULL, NULL), OBELUS_OK);
  turn_until(e, 3);
  CHECK_STR(last_error, "");
  CHECK_INT((int)last_status, 200);
  obelus_engine_free(e);
}

int main(void) {
  start_server();
  if (!base[0]) {
    printf("not ok - the test server did not start (lua5.4 spec/support/httpd.lua)\n");
    return 1;
  }
  RUN(a_c_tool_calls_an_api_and_completes_from_the_answer);
  RUN(a_host_requests_cancels_and_frees_with_transfers_in_flight);
  RUN(http_max_holds_the_transfers_at_once);
  RUN(a_host_request_that_could_split_is_refused_and_the_engines_limits_hold);
  kill(server, SIGTERM);
  return TEST_END();
}
