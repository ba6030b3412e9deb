/* test_plan_share.c -- calls that write the same reference (or _outputPath) share one
 * parsed copy of it (ob_plan.c's memo): one of them owns it, the plan frees it once
 * (ASan checks that),
 * different texts are never shared, and a broken reference is still reported for every
 * call that writes it. */
#include <string.h>

#include "plan/ob_plan.h"
#include "test.h"

static ob_plan *plan_of(const char *json) {
  ob_error err;
  ob_value *v = ob_json_parse(json, strlen(json), &err);
  CHECK(v != NULL);
  ob_plan *p = ob_plan_from_value(v, "share.json");
  ob_unref(v); /* the plan keeps what it needs */
  return p;
}

static const ob_call *call_of(const ob_plan *p, const char *id) {
  for (size_t i = 0; i < p->ncalls; i++)
    if (!strcmp(p->calls[i].id, id))
      return &p->calls[i];
  return NULL;
}

TEST(readers_of_one_reference_share_its_parse) {
  ob_plan *p = plan_of("[{\"_tool\":\"t\",\"_id\":\"src\",\"_outputPath\":\"\xE2\x80\xA0state.src\"},"
                       " {\"_tool\":\"t\",\"_id\":\"r1\",\"x\":\"\xE2\x80\xA0state.src\"},"
                       " {\"_tool\":\"t\",\"_id\":\"r2\",\"x\":\"\xE2\x80\xA0state.src\","
                       "  \"y\":\"\xE2\x80\xA0state.other || \xE2\x80\xA0state.src\"},"
                       " {\"_tool\":\"t\",\"_id\":\"r3\",\"z\":[\"\xE2\x80\xA0state.src\"]}]");
  CHECK_INT(p->nerrors, 0);
  const ob_call *r1 = call_of(p, "r1"), *r2 = call_of(p, "r2"), *r3 = call_of(p, "r3");
  CHECK(r1 && r2 && r3);
  CHECK_INT(r1->nrefs, 1);
  CHECK_INT(r2->nrefs, 2);
  CHECK_INT(r3->nrefs, 1);
  /* the first reader parsed it and owns it; the others point at the same block */
  CHECK_INT(r1->refs[0].owns_expr, 1);
  CHECK_INT(r2->refs[0].owns_expr, 0);
  CHECK_INT(r3->refs[0].owns_expr, 0);
  CHECK(r2->refs[0].expr.block == r1->refs[0].expr.block);
  CHECK(r3->refs[0].expr.block == r1->refs[0].expr.block);
  /* another text is its own, even when it names the same path as one alternative */
  CHECK_INT(r2->refs[1].owns_expr, 1);
  CHECK(r2->refs[1].expr.block != r1->refs[0].expr.block);
  CHECK_INT(r2->refs[1].expr.n, 2);
  /* what the shared copy says is the reference as written */
  CHECK_STR(r3->refs[0].expr.alts[0].refs[0].kind, "state");
  CHECK_STR(r3->refs[0].expr.alts[0].refs[0].path.segs[0].key, "src");
  /* the place is shared where it is the same place, and only there */
  CHECK_STR(r2->refs[0].pointer, "/x");
  CHECK(r2->refs[0].where == r1->refs[0].where && r2->refs[0].pointer == r1->refs[0].pointer);
  CHECK_INT(r1->refs[0].owns_place, 1);
  CHECK_INT(r2->refs[0].owns_place, 0);
  CHECK_STR(r3->refs[0].where, "z[0]");
  CHECK_STR(r3->refs[0].pointer, "/z/0");
  CHECK_INT(r3->refs[0].owns_place, 1);
  /* each call's own seen list (the graph's finding for this call) */
  CHECK(ob_param_ref_seen_c(&r2->refs[0]) != ob_param_ref_seen_c(&r1->refs[0]));
  CHECK_INT(ob_param_ref_seen_c(&r1->refs[0])[0], 1);
  CHECK_INT(r2->refs[1].nparts, 2);
  CHECK_INT(ob_param_ref_seen_c(&r2->refs[1])[0], 0); /* nothing writes state.other */
  CHECK_INT(ob_param_ref_seen_c(&r2->refs[1])[1], 1);
  /* the graph is the same as without sharing: every reader depends on src */
  const ob_call *src = call_of(p, "src");
  CHECK_INT(src->nusers, 3);
  CHECK_INT(r2->ndeps, 1);
  ob_plan_free(p);
}

TEST(instance_copies_share_their_references) {
  ob_plan *p = plan_of("{\"instances\":[\"a\",\"b\",\"c\"],\"plan\":["
                       " {\"_tool\":\"t\",\"_id\":\"w\",\"_outputPath\":\"\xE2\x80\xA0state.v\"},"
                       " {\"_tool\":\"t\",\"_id\":\"r\",\"x\":\"\xE2\x80\xA0state.v\"}]}");
  CHECK_INT(p->nerrors, 0);
  const ob_call *ra = call_of(p, "r@a"), *rb = call_of(p, "r@b"), *rc = call_of(p, "r@c");
  CHECK(ra && rb && rc);
  CHECK_INT(ra->refs[0].owns_expr + rb->refs[0].owns_expr + rc->refs[0].owns_expr, 1);
  CHECK(ra->refs[0].expr.block == rb->refs[0].expr.block);
  CHECK(rb->refs[0].expr.block == rc->refs[0].expr.block);
  CHECK(ra->refs[0].pointer == rc->refs[0].pointer);
  CHECK_INT(ra->refs[0].owns_place + rb->refs[0].owns_place + rc->refs[0].owns_place, 1);
  /* each copy still depends on its own instance's writer only */
  CHECK_INT(rb->ndeps, 1);
  CHECK_STR(p->calls[rb->deps[0]].id, "w@b");
  /* the writers' _outputPath, parsed once, with its path's text */
  const ob_call *wa = call_of(p, "w@a"), *wb = call_of(p, "w@b"), *wc = call_of(p, "w@c");
  CHECK(wa && wb && wc);
  CHECK_INT(wa->output_shared, 0);
  CHECK_INT(wb->output_shared, 1);
  CHECK_INT(wc->output_shared, 1);
  CHECK(wb->output.block == wa->output.block && wc->output_text == wa->output_text);
  CHECK_INT(wb->has_output, 1);
  CHECK_STR(ob_string_ptr(wc->output_text[0]), "v");
  ob_plan_free(p);
}

TEST(calls_writing_one_output_path_share_it) {
  ob_plan *p = plan_of("[{\"_tool\":\"t\",\"_id\":\"a\",\"_outputPath\":\"\xE2\x80\xA0state.list\","
                       "  \"_outputMethod\":\"push\"},"
                       " {\"_tool\":\"t\",\"_id\":\"b\",\"_outputPath\":\"\xE2\x80\xA0state.list\","
                       "  \"_outputMethod\":\"push\"},"
                       " {\"_tool\":\"t\",\"_id\":\"c\",\"_outputPath\":\"list\"},"
                       " {\"_tool\":\"t\",\"_id\":\"d\",\"_outputPath\":\"\xE2\x80\xA0state.[\"}]");
  CHECK_INT(p->nerrors, 1); /* d's, once */
  const ob_call *a = call_of(p, "a"), *b = call_of(p, "b"), *c = call_of(p, "c");
  CHECK(a && b && c);
  CHECK(b->output_shared && b->output.block == a->output.block);
  CHECK(b->method == a->method);
  /* "list" is the same path, but another text: its own parse */
  CHECK_INT(c->output_shared, 0);
  CHECK(c->output.block != a->output.block);
  CHECK_STR(ob_string_ptr(c->output_text[0]), ob_string_ptr(a->output_text[0]));
  CHECK_INT(call_of(p, "d")->has_output, 0);
  ob_plan_free(p);
}

/* more parts than fit beside the record: their flags live on the heap */
TEST(a_reference_of_many_parts_keeps_every_parts_flag) {
  ob_plan *p = plan_of("[{\"_tool\":\"t\",\"_id\":\"w\",\"_outputPath\":\"\xE2\x80\xA0state.a\"},"
                       " {\"_tool\":\"t\",\"_id\":\"r\",\"x\":\"\xE2\x80\xA0state.n1 || \xE2\x80\xA0state.n2"
                       " || \xE2\x80\xA0state.n3 || \xE2\x80\xA0state.n4 || \xE2\x80\xA0state.n5"
                       " || \xE2\x80\xA0state.n6 || \xE2\x80\xA0state.n7 || \xE2\x80\xA0state.n8"
                       " || \xE2\x80\xA0state.a && \xE2\x80\xA0state.n9\"}]");
  CHECK_INT(p->nerrors, 0);
  const ob_call *r = call_of(p, "r");
  CHECK(r != NULL);
  CHECK_INT(r->refs[0].nparts, 10);
  const unsigned char *seen = ob_param_ref_seen_c(&r->refs[0]);
  for (int k = 0; k < 10; k++)
    CHECK_INT(seen[k], k == 8); /* only state.a, the ninth part, has a writer */
  ob_plan_free(p);
}

TEST(a_broken_reference_is_reported_for_every_call) {
  ob_plan *p = plan_of("[{\"_tool\":\"t\",\"_id\":\"a\",\"x\":\"\xE2\x80\xA0state.[\"},"
                       " {\"_tool\":\"t\",\"_id\":\"b\",\"x\":\"\xE2\x80\xA0state.[\"}]");
  CHECK_INT(p->nerrors, 2);
  CHECK(p->nerrors == 2 && strstr(p->errors[0], "call a ") && strstr(p->errors[1], "call b "));
  CHECK_INT(p->calls[0].nrefs + p->calls[1].nrefs, 0);
  ob_plan_free(p);
}

int main(void) {
  RUN(readers_of_one_reference_share_its_parse);
  RUN(instance_copies_share_their_references);
  RUN(calls_writing_one_output_path_share_it);
  RUN(a_reference_of_many_parts_keeps_every_parts_flag);
  RUN(a_broken_reference_is_reported_for_every_call);
  return TEST_END();
}
