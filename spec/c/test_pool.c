/* test_pool.c -- the Lua state's allocator (ob_pool.c): blocks of every size class and
 * beyond, grown and shrunk across classes, keep their bytes; freed blocks are reused;
 * a pool past its first 4 MB (huge slabs) hands out aligned, distinct, usable blocks;
 * a Lua state on the pool runs a program that churns through tables, strings and
 * coroutines. Under ASan the pool passes everything to malloc: the same checks hold. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdint.h>

#include "bridge/ob_pool.h"
#include "test.h"

#if defined(__SANITIZE_ADDRESS__) /* the pool then passes every block to malloc */
#define PASSTHROUGH 1
#endif

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
  rng_state ^= rng_state << 13;
  rng_state ^= rng_state >> 7;
  rng_state ^= rng_state << 17;
  return rng_state;
}

/* Fills n bytes of b with a pattern derived from seed; checks it. */
static void fill(unsigned char *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    b[i] = (unsigned char)(seed * 31 + i);
}
static int intact(const unsigned char *b, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (b[i] != (unsigned char)(seed * 31 + i))
      return 0;
  return 1;
}

TEST(every_size_keeps_its_bytes_through_reallocs) {
  ob_pool *p = ob_pool_new();
  int ok = 1;
  for (size_t n = 1; n <= 2 * OB_POOL_SMALL + 40; n += 7) {
    unsigned char *b = ob_pool_lua_alloc(p, NULL, 0, n);
    CHECK(b != NULL);
    CHECK_INT((uintptr_t)b % 16, 0);
    fill(b, n, (unsigned)n);
    /* grow into another class (or out of the pool), then shrink back */
    size_t big = n * 3 + 5, small = n / 2 + 1;
    b = ob_pool_lua_alloc(p, b, n, big);
    ok &= intact(b, n, (unsigned)n);
    b = ob_pool_lua_alloc(p, b, big, small);
    ok &= intact(b, small, (unsigned)n);
    CHECK(ob_pool_lua_alloc(p, b, small, 0) == NULL);
  }
  CHECK(ok);
  ob_pool_free(p);
}

TEST(a_freed_block_is_the_next_of_its_class) {
  ob_pool *p = ob_pool_new();
  void *a = ob_pool_lua_alloc(p, NULL, 0, 40);
  void *b = ob_pool_lua_alloc(p, NULL, 0, 40);
  CHECK(a != b);
  ob_pool_lua_alloc(p, a, 40, 0);
#ifndef PASSTHROUGH
  void *c = ob_pool_lua_alloc(p, NULL, 0, 33); /* same class: 33..48 bytes */
  CHECK(c == a);
  ob_pool_lua_alloc(p, c, 33, 0);
#endif
  ob_pool_lua_alloc(p, b, 40, 0);
  ob_pool_free(p);
}

/* 40 MB of live blocks of random sizes: past the small slabs into huge ones. Every
 * block is distinct, aligned and keeps its pattern while the others are written. */
TEST(past_the_huge_slab_threshold_blocks_stay_distinct) {
  enum { N = 80000 };
  ob_pool *p = ob_pool_new();
  static unsigned char *blk[N];
  static size_t len[N];
  int ok = 1;
  for (size_t i = 0; i < N; i++) {
    len[i] = 1 + rnd() % OB_POOL_SMALL;
    blk[i] = ob_pool_lua_alloc(p, NULL, 0, len[i]);
    ok &= blk[i] != NULL && (uintptr_t)blk[i] % 16 == 0;
    fill(blk[i], len[i], (unsigned)i);
  }
  for (size_t i = 0; i < N; i++)
    ok &= intact(blk[i], len[i], (unsigned)i);
  CHECK(ok);
  /* free every other block, reallocate them, and check everything again */
  for (size_t i = 0; i < N; i += 2)
    ob_pool_lua_alloc(p, blk[i], len[i], 0);
  for (size_t i = 0; i < N; i += 2) {
    len[i] = 1 + rnd() % OB_POOL_SMALL;
    blk[i] = ob_pool_lua_alloc(p, NULL, 0, len[i]);
    fill(blk[i], len[i], (unsigned)i);
  }
  for (size_t i = 0; i < N; i++)
    ok &= intact(blk[i], len[i], (unsigned)i);
  CHECK(ok);
  for (size_t i = 0; i < N; i++)
    ob_pool_lua_alloc(p, blk[i], len[i], 0);
  ob_pool_free(p);
}

TEST(a_lua_state_on_the_pool_runs_a_churning_program) {
  ob_pool *p = ob_pool_new();
  lua_State *L = ob_pool_new_state(p);
  CHECK(L != NULL);
  luaL_openlibs(L);
  static const char prog[] =
      "local sum, keep = 0, {}\n"
      "for i = 1, 200000 do\n"
      "  local co = coroutine.wrap(function(a) local t = { a, tostring(a), { a } }\n"
      "    coroutine.yield(#t[2]); return t[3][1] end)\n"
      "  sum = sum + co(i) + co()\n"
      "  if i % 1000 == 0 then keep[#keep + 1] = string.rep('x', i % 700) end\n"
      "end\n"
      "return sum, #keep, #keep[150]\n";
  int rc = luaL_dostring(L, prog);
  CHECK_INT(rc, LUA_OK);
  if (rc == LUA_OK) {
    long long digits = 0;
    for (long long i = 1; i <= 200000; i++)
      digits += i < 10 ? 1 : i < 100 ? 2 : i < 1000 ? 3 : i < 10000 ? 4 : i < 100000 ? 5 : 6;
    CHECK_INT(lua_tointeger(L, -3), 200000LL * 200001 / 2 + digits);
    CHECK_INT(lua_tointeger(L, -2), 200);
    CHECK_INT(lua_tointeger(L, -1), 150000 % 700);
  }
  lua_close(L);
  ob_pool_free(p);
}

int main(void) {
  RUN(every_size_keeps_its_bytes_through_reallocs);
  RUN(a_freed_block_is_the_next_of_its_class);
  RUN(past_the_huge_slab_threshold_blocks_stay_distinct);
  RUN(a_lua_state_on_the_pool_runs_a_churning_program);
  return TEST_END();
}
