/* test_graph_svg.c -- Graphviz's dot run on a loop (ob_graph.h's ob_graph_svg): the SVG
 * comes back through the callback, called once, never before ob_graph_svg returns, with
 * every handle closed by then (the loop has nothing left); a DOT dot refuses is its exit
 * status and first stderr line; a dot that dies without reading its input ends no
 * process (no SIGPIPE); input far past the socket's buffer is written whole; no dot on
 * PATH says so; the blocking ob_graph_svg_sync; ob_graph_journal_svg draws a journal with
 * a node per call (id call-<i>) and refuses one it cannot read without calling back.
 * Skipped (passing) where dot is not installed, except the not-installed case. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/ob_graph.h"
#include "test.h"

typedef struct got {
  int calls, ok;
  char *svg, *err;
  size_t len;
} got;

static void on_svg(void *ud, int ok, const char *svg, size_t len, const char *err) {
  got *g = ud;
  g->calls++;
  g->ok = ok;
  g->len = len;
  g->svg = svg ? strndup(svg, len) : NULL;
  g->err = err ? strdup(err) : NULL;
}

static void got_free(got *g) {
  free(g->svg);
  free(g->err);
}

/* Runs ob_graph_svg on a loop of its own until nothing is left; 1 when the callback had
 * not come before ob_graph_svg returned and the loop closes cleanly (no handle left). */
static int draw(const char *dot, size_t len, got *g) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  memset(g, 0, sizeof *g);
  ob_graph_svg(&loop, dot, len, on_svg, g);
  int later = g->calls == 0;
  uv_run(&loop, UV_RUN_DEFAULT);
  return later && uv_loop_close(&loop) == 0;
}

static int have_dot(void) { return system("command -v dot >/dev/null 2>&1") == 0; }

TEST(draws_svg_through_the_callback_once_with_every_handle_closed) {
  if (!have_dot())
    return;
  const char *dot = "digraph g { a [id=\"call-0\"]; b [id=\"call-1\"]; a -> b; }";
  got g;
  CHECK(draw(dot, strlen(dot), &g));
  CHECK_INT(g.calls, 1);
  CHECK_INT(g.ok, 1);
  CHECK(g.err == NULL);
  CHECK(g.svg && strstr(g.svg, "<svg"));
  CHECK(g.svg && strstr(g.svg, "id=\"call&#45;0\""));
  CHECK(g.svg && strstr(g.svg, "<title>b</title>"));
  CHECK_INT(g.len, g.svg ? strlen(g.svg) : 0);
  got_free(&g);
}

TEST(a_dot_that_fails_gives_its_status_and_first_error_line) {
  if (!have_dot())
    return;
  const char *dot = "digraph g { a -> ; }";
  got g;
  CHECK(draw(dot, strlen(dot), &g));
  CHECK_INT(g.calls, 1);
  CHECK_INT(g.ok, 0);
  CHECK(g.svg == NULL);
  CHECK(g.err && strstr(g.err, "Graphviz's dot failed (exit 1)"));
  CHECK(g.err && strstr(g.err, "syntax error"));
  got_free(&g);
}

/* 16 MB after a syntax error on the first line: dot stops reading and exits, the rest of
 * the writes fail (EPIPE), and this process goes on. */
TEST(a_dot_gone_before_its_input_is_written_raises_no_sigpipe) {
  if (!have_dot())
    return;
  size_t n = (size_t)16 << 20;
  char *dot = malloc(n);
  memset(dot, ' ', n);
  memcpy(dot, "digraph g { a -> ; }\n", 21);
  got g;
  CHECK(draw(dot, n, &g));
  CHECK_INT(g.calls, 1);
  CHECK_INT(g.ok, 0);
  CHECK(g.err && strstr(g.err, "syntax error"));
  got_free(&g);
  free(dot);
}

TEST(input_far_past_the_socket_buffer_is_written_whole) {
  if (!have_dot())
    return;
  ob_buf b;
  ob_buf_init(&b);
  ob_buf_addf(&b, "digraph g {\n");
  for (size_t i = 0; i < 200000; i++) /* 7 MB of comment lines (a block comment: 16 KB at most) */
    ob_buf_addf(&b, "// 0123456789abcdefghijklmnopqrstuvw\n");
  ob_buf_addf(&b, " last [id=\"the-end\"]; }\n");
  got g;
  CHECK(draw(b.data, b.len, &g));
  CHECK_INT(g.ok, 1);
  CHECK(g.svg && strstr(g.svg, "<title>last</title>"));
  got_free(&g);
  ob_buf_free(&b);
}

TEST(no_dot_on_path_says_so_from_the_loop) {
  char *path = strdup(getenv("PATH") ? getenv("PATH") : "");
  setenv("PATH", "/nonexistent", 1);
  got g;
  CHECK(draw("digraph g { a; }", 16, &g));
  CHECK_INT(g.calls, 1);
  CHECK_INT(g.ok, 0);
  CHECK(g.err && strstr(g.err, "Graphviz's dot is not installed"));
  got_free(&g);
  ob_buf svg;
  ob_error err;
  ob_buf_init(&svg);
  CHECK_INT(ob_graph_svg_sync("digraph g { a; }", 16, &svg, &err), OB_EIO);
  CHECK(strstr(err.msg, "not installed") != NULL);
  CHECK_INT(svg.len, 0);
  ob_buf_free(&svg);
  setenv("PATH", path, 1);
  free(path);
}

TEST(the_blocking_form_gives_the_same_drawing) {
  if (!have_dot())
    return;
  ob_buf svg;
  ob_error err;
  ob_buf_init(&svg);
  CHECK_INT(ob_graph_svg_sync("digraph g { x -> y; }", 21, &svg, &err), OB_OK);
  CHECK(svg.data && strstr(svg.data, "<title>x&#45;&gt;y</title>"));
  ob_buf_free(&svg);
  CHECK_INT(ob_graph_svg_sync("graph {", 7, &svg, &err), OB_EIO);
  CHECK(strstr(err.msg, "Graphviz's dot failed") != NULL);
  ob_buf_free(&svg);
}

static char journal[64];

TEST(a_journal_drawn_with_a_node_per_call_by_outcome) {
  if (!have_dot())
    return;
  FILE *f = fopen(journal, "wb");
  fputs("{\"type\":\"plan\",\"file\":\"p.json\",\"plan\":{\"plan\":["
        "{\"_id\":\"a\",\"_tool\":\"t\",\"_outputPath\":\"\xE2\x80\xA0state.x\"},"
        "{\"_id\":\"b\",\"_tool\":\"t\",\"v\":\"\xE2\x80\xA0state.x\",\"_outputPath\":\"\xE2\x80\xA0state.y\"},"
        "{\"_id\":\"c\",\"_tool\":\"t\",\"v\":\"\xE2\x80\xA0state.y\",\"_outputPath\":\"\xE2\x80\xA0state.z\"}]}}\n"
        "{\"journal\":\"run\",\"tools\":[]}\n"
        "{\"journal\":\"start\",\"id\":\"a\",\"attempt\":1,\"t\":1}\n"
        "{\"type\":\"data\",\"kind\":\"state\",\"data\":{\"x\":1},\"_path\":\"x\",\"_outputMethod\":\"set\","
        "\"_call\":{\"_id\":\"a\",\"_tool\":\"t\",\"_outputPath\":\"\xE2\x80\xA0state.x\"}}\n"
        "{\"journal\":\"settled\",\"id\":\"a\",\"state\":\"done\",\"t\":2}\n"
        "{\"journal\":\"start\",\"id\":\"b\",\"attempt\":1,\"t\":3}\n"
        "{\"type\":\"data\",\"kind\":\"error\",\"data\":{\"id\":\"b\",\"error\":\"no\",\"phase\":\"runtime\"}}\n"
        "{\"journal\":\"settled\",\"id\":\"b\",\"state\":\"failed\",\"t\":4}\n"
        "{\"journal\":\"settled\",\"id\":\"c\",\"state\":\"skipped\",\"t\":5}\n"
        "{\"journal\":\"end\",\"exit\":1}\n",
        f);
  fclose(f);
  uv_loop_t loop;
  uv_loop_init(&loop);
  got g;
  memset(&g, 0, sizeof g);
  ob_error err;
  CHECK_INT(ob_graph_journal_svg(&loop, journal, 0, on_svg, &g, &err), OB_OK);
  CHECK_INT(g.calls, 0);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK_INT(uv_loop_close(&loop), 0);
  CHECK_INT(g.calls, 1);
  CHECK_INT(g.ok, 1);
  CHECK(g.svg && strstr(g.svg, "<g id=\"call&#45;0\" class=\"node done\">\n<title>n0</title>"));
  CHECK(g.svg && strstr(g.svg, "<g id=\"call&#45;1\" class=\"node failed\">\n<title>n1</title>"));
  CHECK(g.svg && strstr(g.svg, "<g id=\"call&#45;2\" class=\"node skipped\">\n<title>n2</title>"));
  got_free(&g);
}

TEST(a_journal_it_cannot_read_is_an_error_and_no_callback) {
  uv_loop_t loop;
  uv_loop_init(&loop);
  got g;
  memset(&g, 0, sizeof g);
  ob_error err;
  CHECK(ob_graph_journal_svg(&loop, "/nonexistent/run.jsonl", 0, on_svg, &g, &err) != OB_OK);
  CHECK(strstr(err.msg, "/nonexistent/run.jsonl") != NULL);
  uv_run(&loop, UV_RUN_DEFAULT);
  CHECK_INT(g.calls, 0);
  CHECK_INT(uv_loop_close(&loop), 0);
}

int main(void) {
  snprintf(journal, sizeof journal, "/tmp/obelus-graph-svg-%ld.jsonl", (long)getpid());
  RUN(draws_svg_through_the_callback_once_with_every_handle_closed);
  RUN(a_dot_that_fails_gives_its_status_and_first_error_line);
  RUN(a_dot_gone_before_its_input_is_written_raises_no_sigpipe);
  RUN(input_far_past_the_socket_buffer_is_written_whole);
  RUN(no_dot_on_path_says_so_from_the_loop);
  RUN(the_blocking_form_gives_the_same_drawing);
  RUN(a_journal_drawn_with_a_node_per_call_by_outcome);
  RUN(a_journal_it_cannot_read_is_an_error_and_no_callback);
  unlink(journal);
  return TEST_END();
}
