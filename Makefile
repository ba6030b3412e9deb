# obelus -- build, deps, test, bench, demo, clean.
# On a fresh Debian machine `make demo` and `make test` each install what they miss
# first (the check is one dpkg-query, a few ms when all is there), then build what they
# need: a recursive make, so that pkg-config's flags are read after the install.

CC      ?= cc
PKGS    := lua5.4 lua5.4-luv jansson libpcre2-8 libuv libcurl hiredis libwebsockets
# what building and `make demo` need (the embedded default: no Redis server, no browser)
BUILD_PKGS := gcc make pkg-config liblua5.4-dev lua5.4 lua-cjson lua-cjson-dev \
              libuv1-dev lua-luv lua-luv-dev libjansson-dev libpcre2-dev \
              libcurl4-openssl-dev libhiredis-dev libwebsockets-dev libwebsockets-evlib-uv \
              zlib1g-dev graphviz
# and what the tests and benchmarks drive
DEB_PKGS := $(BUILD_PKGS) lua-busted json-schema-test-suite valgrind lua-check man-db dpkg-dev luarocks \
            nginx-light openssl curl nodejs time redis-server zsh bash-completion chromium

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# libcurl is not linked: ob_curl.c loads it at the first HTTP transfer (its headers only
# here); nor is libwebsockets: ob_lws.c loads it when `obelus ui` starts its server
PKG_LIBS   := $(shell pkg-config --libs $(filter-out libcurl libwebsockets,$(PKGS)) 2>/dev/null)

WARN    := -Wall -Wextra -Wshadow -Wno-unused-parameter -Wstrict-prototypes
CFLAGS  ?= -O2 -g
# Link-time optimisation of the release build: the value store's small accessors
# (ob_typeof, ob_string_len, ...) inline into their callers across files (measured:
# 7% fewer instructions a call in bench chain/fanout). Fat objects keep ordinary code
# too, so libobelus.a links into hosts built without LTO. `make REL_LTO=` turns it off.
REL_LTO ?= -flto=auto -ffat-lto-objects
# Direct calls. -fno-plt: calls into shared libraries (Lua's C API, libuv, libc) go
# through the GOT, not a PLT stub: one indirect call rather than a call and a jump, and
# the engine makes about 40 Lua API calls a tool call. Measured (bench/obelus-bench, three
# sets of 9-11 paired rounds, the floor built alike): chain 100000 4-8% and fanout 100000
# 2-5% more calls a second; the bare-Lua floor itself 2-4%. Symbols are then bound as the
# program loads, not at their first call (a one-call run: ~60 us more).
# -fno-semantic-interposition: in the Lua module and libobelus.so the engine's functions
# call each other directly and may be inlined, as in the program, rather than through
# the PLT in case something replaced them at load time (nothing does). Measured: a
# 50,000-call chain run through the Lua module, 7 paired runs, 175 to 164 ms (the plan's
# reading included); the program, where the linker knew it already, +1-2% (noise). The
# instrumented build (PGO) uses these too: they change what is inlined before the counts
# are placed, and counts that do not match are ignored. `make REL_DIRECT=` turns both off.
REL_DIRECT ?= -fno-plt -fno-semantic-interposition
# What the release objects and every link of them (program, Lua module, shared library,
# bench) are built with, in one place.
REL_CODE = $(REL_LTO) $(REL_DIRECT)
# Profile-guided optimisation of the release build: the engine's objects are first built
# instrumented (build/pgo), bench/pgo-train runs them on the common paths, and the release
# objects are compiled with the counts (inlining, code layout, branch order). Measured
# (bench/obelus-bench, 9 paired rounds): chain 100000 12-14% and fanout 100000 16-21% more
# calls a second. The profile is made once per build folder (on a fresh clone: the first
# build, ~15 s more); `make pgo` makes it again after changes (stale counts are ignored, function
# by function). `make PGO=0` builds without it; it is GCC's (other compilers: off).
ifndef PGO
PGO := $(if $(shell $(CC) -v 2>&1 | grep '^gcc version'),1,0)
endif
PGO_DATA := $(CURDIR)/build/pgo/data
ifeq ($(PGO),1)
REL_PGO = -fprofile-use=$(PGO_DATA) $(PGO_NAME) -fprofile-partial-training \
          -Wno-missing-profile -Wno-coverage-mismatch
PGO_STAMP := build/pgo/trained
endif
# -fvisibility=hidden: the shared library and core.so export only obelus.h's functions
# and luaopen_obelus_core (make layers checks it with nm)
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE -fPIC -fvisibility=hidden $(WARN) -Icore $(PKG_CFLAGS)

# The version, said here alone (the rockspec's name, CHANGELOG.md's newest entry and the
# .deb follow it: spec/cli/package_spec.lua checks they agree). It is compiled in as
# OB_VERSION: `obelus --version`, obelus_version(), MCP's serverInfo, the trace's
# metadata. `obelus --version` adds the git revision the program was built from
# (OB_GIT_REV, main.c only), read at each make when this folder is a git checkout's top
# (not in the tarball of `make dist`, even unpacked inside another repository). Each
# lives in a file of build/gen rewritten only when it changes, so a new commit rebuilds
# main.o and relinks the program, and a new version the four files that use it.
VERSION := 0.1.0
GIT_REV := $(shell [ "$$(git rev-parse --show-toplevel 2>/dev/null)" -ef . ] && git rev-parse --short HEAD 2>/dev/null)
BASE_CFLAGS += -DOB_VERSION='"$(VERSION)"'
VERSION_USERS := cli/main host/obelus host/ob_mcp host/ob_trace
$(foreach b,rel asan tsan pgo,$(VERSION_USERS:%=build/$(b)/%.o)): build/gen/version
$(foreach b,rel asan tsan pgo,build/$(b)/cli/main.o): build/gen/git-rev
$(foreach b,rel asan tsan pgo,build/$(b)/cli/main.o): BASE_CFLAGS += $(if $(GIT_REV),-DOB_GIT_REV='"$(GIT_REV)"')
build/gen/version: FORCE
	@mkdir -p build/gen; echo '$(VERSION)' | cmp -s - $@ || echo '$(VERSION)' > $@
build/gen/git-rev: FORCE
	@mkdir -p build/gen; echo '$(GIT_REV)' | cmp -s - $@ || echo '$(GIT_REV)' > $@
.PHONY: FORCE
FORCE:
ASAN_FLAGS  := -O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer \
               -fno-sanitize-recover=undefined
# ThreadSanitizer, for the C tests of code that runs threads (the journal writer's syncer).
TSAN_FLAGS  := -O1 -g -fsanitize=thread -fno-omit-frame-pointer
LDLIBS  := $(PKG_LIBS) -lm -ldl

LUA     ?= lua5.4
BUSTED  := $(LUA) /usr/bin/busted

# core/ is layers, one folder each, lowest first (docs/architecture.md); the library is
# every layer but cli/, the command line, which only bin/obelus links (with the C tests,
# one of which runs a command in-process: they link the cli archive before the library).
LAYERS   := base log bridge io plan engine drive fleet host
CORE_SRC := $(foreach l,$(LAYERS),$(wildcard core/$(l)/*.c))
CLI_SRC  := $(filter-out core/cli/main.c,$(wildcard core/cli/*.c))
CORE_HDR := core/obelus.h $(wildcard core/*/*.h)
# and what is generated: the runtime's Lua, the web app's files (ui/embed.lua)
GEN_OBJ  := engine/ob_runtime_lua.o host/ob_ui_assets.o
REL_OBJ  := $(CORE_SRC:core/%.c=build/rel/%.o) $(GEN_OBJ:%=build/rel/%)
ASAN_OBJ := $(CORE_SRC:core/%.c=build/asan/%.o) $(GEN_OBJ:%=build/asan/%)
TSAN_OBJ := $(CORE_SRC:core/%.c=build/tsan/%.o) $(GEN_OBJ:%=build/tsan/%)
CTESTS   := $(basename $(notdir $(wildcard spec/c/test_*.c)))
# the tests whose code under test starts threads: also built and run under TSan
TSAN_CTESTS := $(filter test_wal_% test_api_threads,$(CTESTS))
BENCH_SRC := $(wildcard bench/*.c)

.PHONY: pgo fuzz torture all deps deps-build deps-quiet test test-run test-c test-lua test-lua-rel test-lua-rel-1 test-lua-rel-2 test-lua-asan test-lua-asan-1 test-lua-asan-2 test-lua-tsan bench bench-peers bench-fleet demo demo-build demo-run demo-cluster clean
.DELETE_ON_ERROR:

all: bin/obelus lib/libobelus.a lib/libobelus.so lib/obelus/core.so

# --- dependencies: installs only what is missing (one dpkg-query); safe to run again ---
define install_missing
	@installed=" $$(dpkg-query -W -f='$${Package} $${Status}\n' $(1) 2>/dev/null | \
	  awk '$$NF == "installed" { print $$1 }' | tr '\n' ' ')"; missing=""; \
	for p in $(1); do case "$$installed" in *" $$p "*) ;; *) missing="$$missing $$p";; esac; done; \
	if [ -z "$$missing" ]; then $(2); exit 0; fi; \
	SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	echo "deps: installing$$missing"; \
	$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing
endef

deps:
	$(call install_missing,$(DEB_PKGS),echo "deps: everything is installed")
deps-build:
	$(call install_missing,$(BUILD_PKGS),true)
deps-quiet:
	$(call install_missing,$(DEB_PKGS),true)

# --- the library, the CLI, the Lua module ---
build/rel/%.o: core/%.c $(CORE_HDR) | $(PGO_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(REL_CODE) $(REL_PGO) -MMD -c $< -o $@
build/asan/%.o: core/%.c $(CORE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(ASAN_FLAGS) -c $< -o $@
build/tsan/%.o: core/%.c $(CORE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(TSAN_FLAGS) -c $< -o $@

# The Lua half of the `obelus` module tools require, compiled into the engine.
build/gen/ob_runtime_lua.c: lua/obelus/runtime.lua
	@mkdir -p build/gen
	$(LUA) -e 'local s = io.read("a"); io.write("/* generated from lua/obelus/runtime.lua */\n#include <stddef.h>\nconst char ob_runtime_lua[] = {"); for i = 1, #s do io.write(s:byte(i), i % 24 == 0 and ",\n" or ",") end; io.write("0};\nconst size_t ob_runtime_lua_len = ", #s, ";\n")' < $< > $@
build/rel/engine/ob_runtime_lua.o: build/gen/ob_runtime_lua.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -c $< -o $@
build/asan/engine/ob_runtime_lua.o: build/gen/ob_runtime_lua.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(ASAN_FLAGS) -c $< -o $@
build/tsan/engine/ob_runtime_lua.o: build/gen/ob_runtime_lua.c
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(TSAN_FLAGS) -c $< -o $@

# The web app of `obelus ui` (and `obelus report`'s page), compiled into the library.
UI_FILES := ui/index.html ui/app.css ui/app.js
build/gen/ob_ui_assets.c: ui/embed.lua $(UI_FILES)
	@mkdir -p build/gen
	$(LUA) ui/embed.lua $@ $(UI_FILES)
build/rel/host/ob_ui_assets.o: build/gen/ob_ui_assets.c core/host/ob_ui_assets.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) -c $< -o $@
build/asan/host/ob_ui_assets.o: build/gen/ob_ui_assets.c core/host/ob_ui_assets.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(ASAN_FLAGS) -c $< -o $@
build/tsan/host/ob_ui_assets.o: build/gen/ob_ui_assets.c core/host/ob_ui_assets.h
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(TSAN_FLAGS) -c $< -o $@

lib/libobelus.a: $(REL_OBJ) | lib
	rm -f $@ && ar rcs $@ $^
build/asan/libobelus.a: $(ASAN_OBJ)
	rm -f $@ && ar rcs $@ $^
build/tsan/libobelus.a: $(TSAN_OBJ)
	rm -f $@ && ar rcs $@ $^

build/rel/libobelus-cli.a: $(CLI_SRC:core/%.c=build/rel/%.o)
	rm -f $@ && ar rcs $@ $^
build/asan/libobelus-cli.a: $(CLI_SRC:core/%.c=build/asan/%.o)
	rm -f $@ && ar rcs $@ $^
build/tsan/libobelus-cli.a: $(CLI_SRC:core/%.c=build/tsan/%.o)
	rm -f $@ && ar rcs $@ $^

bin/obelus: build/rel/cli/main.o build/rel/libobelus-cli.a lib/libobelus.a | bin
	$(CC) $(CFLAGS) $(REL_CODE) -o $@ $^ $(LDLIBS)
build/asan/obelus: build/asan/cli/main.o build/asan/libobelus-cli.a build/asan/libobelus.a
	$(CC) $(ASAN_FLAGS) -o $@ $^ $(LDLIBS)
build/tsan/obelus: build/tsan/cli/main.o build/tsan/libobelus-cli.a build/tsan/libobelus.a
	$(CC) $(TSAN_FLAGS) -o $@ $^ $(LDLIBS)

# The Lua C module `obelus.core`, loadable from stock lua5.4 (and busted).
lib/obelus/core.so: $(REL_OBJ)
	@mkdir -p lib/obelus
	$(CC) -shared $(CFLAGS) $(REL_CODE) -o $@ $^ $(filter-out -llua5.4,$(LDLIBS))

# The shared library for hosts: the same PIC objects as libobelus.a, linked
# against its dependencies (-z defs proves none is missing), versioned with an
# soname so a rebuilt 0.x library replaces the old one without relinking hosts.
SO_MAJOR   := 0
SO_VERSION := 0.1.0
lib/libobelus.so.$(SO_VERSION): $(REL_OBJ) | lib
	$(CC) -shared -Wl,-soname,libobelus.so.$(SO_MAJOR) -Wl,-z,defs $(CFLAGS) $(REL_CODE) -o $@ $^ $(LDLIBS)
lib/libobelus.so: lib/libobelus.so.$(SO_VERSION)
	ln -sf libobelus.so.$(SO_VERSION) lib/libobelus.so.$(SO_MAJOR)
	ln -sf libobelus.so.$(SO_MAJOR) $@

# The profile: instrumented objects, whose counts go to PGO_DATA. GCC names a file's counts
# (and tells its static functions apart) by the compile's auxiliary name, which follows
# the object's path unless given: both compiles give the same one (PGO_NAME), so that the
# release objects find the counts of the instrumented ones. The instrumented build skips
# link-time optimisation (counts are placed before it; measured: the same speed after,
# and the training build in half the time). The stamp has no
# prerequisites: once made, editing a source does not retrain (see `make pgo`).
PGO_NAME = -dumpdir $(CURDIR)/build/pgo/name/ -dumpbase $(notdir $<)
PGO_OBJ := $(CORE_SRC:core/%.c=build/pgo/%.o)
PGO_CLI := $(CLI_SRC:core/%.c=build/pgo/%.o) build/pgo/cli/main.o
PGO_GEN := -fprofile-generate=$(PGO_DATA) -fprofile-update=single
build/pgo/%.o: core/%.c $(CORE_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(REL_DIRECT) $(PGO_GEN) $(PGO_NAME) -c $< -o $@
build/pgo/obelus: $(PGO_CLI) $(PGO_OBJ) $(GEN_OBJ:%=build/rel/%)
	$(CC) $(CFLAGS) $(PGO_GEN) -o $@ $^ $(LDLIBS)
build/pgo/obelus-bench: $(BENCH_SRC) $(PGO_OBJ) $(GEN_OBJ:%=build/rel/%)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(PGO_GEN) -o $@ $^ $(LDLIBS)
build/pgo/trained:
	@rm -rf $(PGO_DATA)
	@$(MAKE) --no-print-directory PGO=0 build/pgo/obelus build/pgo/obelus-bench
	@sh bench/pgo-train build/pgo
	@touch $@
# Trains again and rebuilds the release objects with the new profile.
pgo:
	rm -rf build/pgo build/rel/*/*.o
	$(MAKE) --no-print-directory all

build/rel build/asan build/tsan build/test bin lib:
	@mkdir -p $@

# --- tests ---
# The release objects carry GCC's link-time-optimisation code beside their own
# (-ffat-lto-objects), and the linker plugin optimises the whole engine again at
# any link that pulls them in, -flto given or not: 10 s a test, 4 minutes for
# the C tests. -fno-lto links the objects' own code (-O2 and the profile, not
# the program's cross-file inlining, which the busted specs run).
NO_LTO := $(if $(REL_LTO),-fno-lto)
build/test/rel/%: spec/c/%.c $(wildcard spec/c/*.h) lib/libobelus.a build/rel/libobelus-cli.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(NO_LTO) -Ispec/c -o $@ $< build/rel/libobelus-cli.a lib/libobelus.a $(LDLIBS)
build/test/asan/%: spec/c/%.c $(wildcard spec/c/*.h) build/asan/libobelus.a build/asan/libobelus-cli.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(ASAN_FLAGS) -Ispec/c -o $@ $< build/asan/libobelus-cli.a build/asan/libobelus.a $(LDLIBS)
build/test/tsan/%: spec/c/%.c $(wildcard spec/c/*.h) build/tsan/libobelus.a build/tsan/libobelus-cli.a
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(TSAN_FLAGS) -Ispec/c -o $@ $< build/tsan/libobelus-cli.a build/tsan/libobelus.a $(LDLIBS)

# Each run's last line counts in the summary; TSan fails a test on its first report.
# bin/obelus too: test_api_queue runs a real worker.
test-c: $(CTESTS:%=build/test/rel/%) $(CTESTS:%=build/test/asan/%) $(TSAN_CTESTS:%=build/test/tsan/%) \
        bin/obelus
	@mkdir -p build/results
	@sh spec/run-c build/test/rel $(CTESTS) > build/results/c-rel.txt; cat build/results/c-rel.txt | tail -n 1
	@ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  sh spec/run-c build/test/asan $(CTESTS) > build/results/c-asan.txt; tail -n 1 build/results/c-asan.txt
	@TSAN_OPTIONS="halt_on_error=1 exitcode=66" \
	  sh spec/run-c build/test/tsan $(TSAN_CTESTS) > build/results/c-tsan.txt; tail -n 1 build/results/c-tsan.txt

test-lua: test-lua-rel test-lua-asan test-lua-tsan
# in two halves each, run side by side (the longest parts of `make test`)
# (explicit rules: make applies no pattern rule to a .PHONY target)
REL_BUSTED = @mkdir -p build/results; OBELUS_BIN=$(CURDIR)/bin/obelus \
  OBELUS_SHARD=$(1)/2 sh spec/run-busted "$(BUSTED)" > build/results/lua-rel-$(1).txt; \
  tail -n 1 build/results/lua-rel-$(1).txt
test-lua-rel: test-lua-rel-1 test-lua-rel-2
test-lua-rel-1: all
	$(call REL_BUSTED,1)
test-lua-rel-2: all
	$(call REL_BUSTED,2)
ASAN_BUSTED = @mkdir -p build/results; OBELUS_BIN=$(CURDIR)/build/asan/obelus OBELUS_ONLY_CLI=1 \
  OBELUS_SHARD=$(1)/2 sh spec/run-busted "$(BUSTED)" > build/results/lua-asan-$(1).txt; \
  tail -n 1 build/results/lua-asan-$(1).txt
test-lua-asan: test-lua-asan-1 test-lua-asan-2
test-lua-asan-1: all build/asan/obelus
	$(call ASAN_BUSTED,1)
test-lua-asan-2: all build/asan/obelus
	$(call ASAN_BUSTED,2)
test-lua-tsan: all build/tsan/obelus
	@mkdir -p build/results
	@OBELUS_BIN=$(CURDIR)/build/tsan/obelus OBELUS_SPECS="spec/cli/threads_spec.lua spec/cli/progress_spec.lua spec/cli/emit_spec.lua spec/cli/each_spec.lua" \
	  TSAN_OPTIONS="halt_on_error=1 exitcode=66 suppressions=$(CURDIR)/spec/tsan.supp" sh spec/run-busted "$(BUSTED)" > build/results/lua-tsan.txt; \
	  tail -n 1 build/results/lua-tsan.txt

# luacheck on the Lua modules and the example plans' tools (.luacheckrc): "ok" for each
# clean file, "not ok" for each warning, then "luacheck: N passed, M failed".
.PHONY: test-luacheck
test-luacheck:
	@mkdir -p build/results
	@{ if command -v luacheck >/dev/null; then luacheck --formatter TAP lua/ plans/; \
	   else echo "not ok 1 luacheck is not installed (make deps)"; fi; } > build/results/luacheck.txt; \
	 p=$$(grep -c '^ok ' build/results/luacheck.txt); f=$$(grep -c '^not ok ' build/results/luacheck.txt); \
	 echo "luacheck: $$p passed, $$f failed" | tee -a build/results/luacheck.txt; [ $$f = 0 ]

# The completion scripts in completions/ are `obelus completion bash|zsh`'s output, made
# from the CLI's table of commands and options (core/cli/ob_cli_opts.c): checked in, so
# that install and the package need no built obelus; written again after the table
# changes (spec/cli/cli_opts_spec.lua fails while they differ).
.PHONY: completions
completions: bin/obelus
	bin/obelus completion bash > completions/obelus.bash.new && mv completions/obelus.bash.new completions/obelus.bash
	bin/obelus completion zsh > completions/_obelus.new && mv completions/_obelus.new completions/_obelus

# The include rule of core/: a file includes its own layer and those below it
# (core/layers.awk: a file's layer is its folder; obelus.h is the public API, with host/).
.PHONY: layers test-layers
layers:
	@awk -f core/layers.awk core/obelus.h core/*/*.[ch] && echo "layers: every include goes down"
test-layers:
	@mkdir -p build/results
	@awk -f core/layers.awk core/obelus.h core/*/*.[ch] > build/results/layers.out; r=$$?; \
	 if [ $$r = 0 ]; then echo "ok 1 every include of core/ goes down a layer" > build/results/layers.txt; \
	 else sed 's/^/not ok 1 /' build/results/layers.out > build/results/layers.txt; fi; \
	 echo "layers: $$([ $$r = 0 ] && echo 1 || echo 0) passed, $$([ $$r = 0 ] && echo 0 || echo 1) failed" \
	   | tee -a build/results/layers.txt; [ $$r = 0 ]

# `make test`: what is missing installed, then everything built and run
test:
	@$(MAKE) --no-print-directory deps-quiet
	@$(MAKE) --no-print-directory test-run

# The parts run side by side (TEST_JOBS, -j4 by default; `make test TEST_JOBS=-j1` runs
# them one after the other): the specs mostly wait, on the processes they start and the
# servers they talk to, and the builds of the three variants are independent. Each part
# writes its results to build/results; -k runs every part whatever another did. The
# specs run side by side must not share a file: each names what it writes per run.
# Measured on 2 cores, a clean clone, `time make test-run`: 15 min 50 s one part after
# the other, with the C tests' LTO links (4 min of them); 5 min 20 s now.
TEST_JOBS ?= -j4
# the result files they leave: one missing is a failure (a part that did not run)
TEST_RESULTS := c-rel c-asan c-tsan lua-rel-1 lua-rel-2 lua-asan-1 lua-asan-2 lua-tsan luacheck examples layers
TEST_PARTS := test-c test-lua-rel-1 test-lua-rel-2 test-lua-asan-1 test-lua-asan-2 test-lua-tsan test-luacheck test-examples test-layers
test-run:
	@rm -rf build/results
	@$(MAKE) --no-print-directory -k $(TEST_JOBS) $(TEST_PARTS); r=$$?; \
	 sh spec/summary build/results $(TEST_RESULTS); s=$$?; [ $$r = 0 ] && [ $$s = 0 ]

# --- install: PREFIX (default /usr/local); DESTDIR stages into a package root ---
PREFIX       ?= /usr/local
BINDIR       ?= $(PREFIX)/bin
LIBDIR       ?= $(PREFIX)/lib
INCLUDEDIR   ?= $(PREFIX)/include
MANDIR       ?= $(PREFIX)/share/man
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
LUA_CDIR     ?= $(LIBDIR)/lua/5.4
LUA_LDIR     ?= $(PREFIX)/share/lua/5.4
LUA_FILES    := $(wildcard lua/obelus/*.lua)

.PHONY: install uninstall examples test-examples
install: all core/obelus.h obelus.pc.in doc/obelus.1
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR) $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(PKGCONFIGDIR) \
	  $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(LUA_CDIR)/obelus $(DESTDIR)$(LUA_LDIR)/obelus
	install -m 755 bin/obelus $(DESTDIR)$(BINDIR)/obelus
	install -m 644 lib/libobelus.a $(DESTDIR)$(LIBDIR)/libobelus.a
	install -m 755 lib/libobelus.so.$(SO_VERSION) $(DESTDIR)$(LIBDIR)/libobelus.so.$(SO_VERSION)
	ln -sf libobelus.so.$(SO_VERSION) $(DESTDIR)$(LIBDIR)/libobelus.so.$(SO_MAJOR)
	ln -sf libobelus.so.$(SO_MAJOR) $(DESTDIR)$(LIBDIR)/libobelus.so
	install -m 644 core/obelus.h $(DESTDIR)$(INCLUDEDIR)/obelus.h
	sed -e 's|@PREFIX@|$(PREFIX)|g' -e 's|@LIBDIR@|$(LIBDIR)|g' \
	    -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|g' -e 's|@VERSION@|$(VERSION)|g' \
	    obelus.pc.in > $(DESTDIR)$(PKGCONFIGDIR)/obelus.pc
	chmod 644 $(DESTDIR)$(PKGCONFIGDIR)/obelus.pc
	install -m 755 lib/obelus/core.so $(DESTDIR)$(LUA_CDIR)/obelus/core.so
	install -m 644 $(LUA_FILES) $(DESTDIR)$(LUA_LDIR)/obelus/
	install -m 644 doc/obelus.1 $(DESTDIR)$(MANDIR)/man1/obelus.1
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions $(DESTDIR)$(PREFIX)/share/zsh/site-functions
	install -m 644 completions/obelus.bash $(DESTDIR)$(PREFIX)/share/bash-completion/completions/obelus
	install -m 644 completions/_obelus $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_obelus
	@# the dynamic linker's cache learns the new soname: only for a real root install
	@# into a folder the linker searches (other prefixes: rpath or LD_LIBRARY_PATH)
	@case "$(DESTDIR):$(LIBDIR)" in :/usr/lib|:/usr/local/lib) \
	  [ "$$(id -u)" = 0 ] && command -v ldconfig >/dev/null && ldconfig || true;; esac

# Removes what install put, and the two folders that are obelus's alone.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/obelus $(DESTDIR)$(LIBDIR)/libobelus.a \
	  $(DESTDIR)$(LIBDIR)/libobelus.so $(DESTDIR)$(LIBDIR)/libobelus.so.$(SO_MAJOR) \
	  $(DESTDIR)$(LIBDIR)/libobelus.so.$(SO_VERSION) $(DESTDIR)$(INCLUDEDIR)/obelus.h \
	  $(DESTDIR)$(PKGCONFIGDIR)/obelus.pc $(DESTDIR)$(LUA_CDIR)/obelus/core.so \
	  $(LUA_FILES:lua/obelus/%=$(DESTDIR)$(LUA_LDIR)/obelus/%) $(DESTDIR)$(MANDIR)/man1/obelus.1 \
	  $(DESTDIR)$(PREFIX)/share/bash-completion/completions/obelus \
	  $(DESTDIR)$(PREFIX)/share/zsh/site-functions/_obelus
	rmdir $(DESTDIR)$(LUA_CDIR)/obelus $(DESTDIR)$(LUA_LDIR)/obelus 2>/dev/null || true

# --- releases: the tarball (make dist) and the Debian package (make deb) ---
# `make dist`: DIST_OUT/obelus-VERSION.tar.gz, the files git tracks (as they are in the
# work tree) under obelus-VERSION/, with fixed owners, order and times (the last
# commit's), so that the same tree gives the same bytes. It needs a git checkout.
# spec/cli/package_spec.lua unpacks it and builds bin/obelus (unoptimised, for speed) and
# runs a plan; `make dist-check` runs the full `make test` in the unpacked tarball.
DIST_OUT  ?= build/dist
DIST_NAME := obelus-$(VERSION)
.PHONY: dist dist-check deb
dist:
	@[ "$$(git rev-parse --show-toplevel 2>/dev/null)" -ef . ] || \
	  { echo "make dist: not a git checkout (the tarball holds the files git tracks)" >&2; exit 2; }
	@mkdir -p $(DIST_OUT)
	@git -c core.quotepath=off ls-files | while IFS= read -r f; do \
	   { [ -e "$$f" ] || [ -L "$$f" ]; } && printf '%s\n' "$$f"; done | \
	 tar -c --verbatim-files-from -T - --transform 's,^,$(DIST_NAME)/,S' --sort=name --format=gnu \
	   --owner=0 --group=0 --numeric-owner --mtime=@$$(git log -1 --format=%ct) | \
	 gzip -9n > $(DIST_OUT)/$(DIST_NAME).tar.gz
	@echo "dist: $(DIST_OUT)/$(DIST_NAME).tar.gz"
dist-check: dist
	@tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/obelus-dist.XXXXXX") && trap 'rm -rf "$$tmp"' EXIT INT TERM && \
	 tar -xzf $(DIST_OUT)/$(DIST_NAME).tar.gz -C "$$tmp" && \
	 echo "dist-check: make test in $$tmp/$(DIST_NAME)" && $(MAKE) -C "$$tmp/$(DIST_NAME)" test

# `make deb`: DEB_OUT/obelus_VERSION-1_ARCH.deb, from the tree `make install` stages with
# PREFIX=/usr (the build as it is: nothing is compiled again), with the man page and the
# changelog compressed, the program and shared objects stripped (libobelus.a is kept
# whole: its objects carry the LTO code a host's -flto build uses), the licence as the
# copyright file, md5sums, the ldconfig trigger
# of a package that ships a shared library, and DEBIAN/control from packaging/control.in
# with the shared libraries' packages computed by dpkg-shlibdeps (dpkg-dev). dpkg-deb
# --root-owner-group builds it as root's files without fakeroot.
DEB_OUT  ?= build/deb
DEB_ARCH  = $(shell dpkg --print-architecture)
DEB_FILE  = $(DEB_OUT)/obelus_$(VERSION)-1_$(DEB_ARCH).deb
deb: all
	@rm -rf $(DEB_OUT)/debian && mkdir -p $(DEB_OUT)/debian
	@$(MAKE) --no-print-directory install DESTDIR=$(abspath $(DEB_OUT))/debian/obelus PREFIX=/usr >/dev/null
	@set -e; root=$(DEB_OUT)/debian/obelus; doc=$$root/usr/share/doc/obelus; \
	 strip --strip-unneeded --remove-section=.comment --remove-section=.note $$root/usr/bin/obelus \
	   $$root/usr/lib/libobelus.so.$(SO_VERSION) $$root/usr/lib/lua/5.4/obelus/core.so; \
	 gzip -9n $$root/usr/share/man/man1/obelus.1; \
	 install -d $$doc; install -m 644 LICENSE $$doc/copyright; \
	 gzip -9n < CHANGELOG.md > $$doc/changelog.gz; chmod 644 $$doc/changelog.gz; \
	 install -d $$root/DEBIAN; install -m 644 packaging/triggers $$root/DEBIAN/triggers; \
	 printf 'Source: obelus\n\nPackage: obelus\nArchitecture: any\n' > $(DEB_OUT)/debian/control; \
	 shlibs=$$(cd $(DEB_OUT) && dpkg-shlibdeps -O debian/obelus/usr/bin/obelus \
	   debian/obelus/usr/lib/libobelus.so.$(SO_VERSION) debian/obelus/usr/lib/lua/5.4/obelus/core.so | \
	   sed -n 's/^shlibs:Depends=//p'); \
	 [ -n "$$shlibs" ] || { echo "make deb: dpkg-shlibdeps found no dependency" >&2; exit 1; }; \
	 size=$$(du -sk --apparent-size $$root/usr | cut -f1); \
	 sed -e '/^#/d' -e 's|@VERSION@|$(VERSION)|' -e 's|@ARCH@|$(DEB_ARCH)|' -e "s|@SIZE@|$$size|" \
	   -e "s|@SHLIBS@|$$shlibs|" packaging/control.in > $$root/DEBIAN/control; \
	 (cd $$root && find usr -type f | LC_ALL=C sort | xargs md5sum) > $$root/DEBIAN/md5sums; \
	 chmod 644 $$root/DEBIAN/md5sums; \
	 dpkg-deb --root-owner-group -Zgzip --build $$root $(DEB_FILE) >/dev/null
	@echo "deb: $(DEB_FILE)"

# --- example hosts (examples/*.c): built against the public header only ---
EXAMPLES := $(basename $(notdir $(wildcard examples/*.c)))
build/examples/%: examples/%.c core/obelus.h lib/libobelus.a
	@mkdir -p build/examples
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(NO_LTO) -o $@ $< lib/libobelus.a $(LDLIBS)
examples: $(EXAMPLES:%=build/examples/%)

# Runs the hosts (and many_engines under valgrind), then the installed-prefix test.
test-examples: examples all
	@mkdir -p build/results
	@MAKE="$(MAKE)" sh examples/run-tests build/examples > build/results/examples.txt; \
	  rc=$$?; tail -n 1 build/results/examples.txt; exit $$rc

# --- benchmarks ---
bench/obelus-bench: $(BENCH_SRC) lib/libobelus.a
	$(CC) $(BASE_CFLAGS) $(CFLAGS) $(REL_CODE) -o $@ $(BENCH_SRC) lib/libobelus.a $(LDLIBS)
bench: bench/obelus-bench
	sh bench/run

clean:
	rm -rf build bin lib bench/obelus-bench

-include $(wildcard build/rel/*/*.d)

# obelus against LangGraph.js and async.auto (npm-installed into bench/peers/node_modules).
bench-peers: bin/obelus
	@cd bench/peers && [ -d node_modules/@langchain/langgraph ] || npm install --no-audit --no-fund --silent
	@cd bench && lua5.4 peers.lua

# obelus's job queue against BullMQ (npm bullmq, also into bench/peers/node_modules), end to
# end, each run on a redis-server of its own (bench/fleet_peers.lua says what and how;
# OBELUS_FLEETP_* set the sizes and rounds).
bench-fleet: bin/obelus
	@cd bench/peers && [ -d node_modules/bullmq ] && [ -d node_modules/ioredis ] || npm install --no-audit --no-fund --silent
	@cd bench && lua5.4 fleet_peers.lua

# A batch on two workers and a redis-server of its own; one worker is killed halfway.
demo-cluster: bin/obelus
	@sh plans/cluster/demo.sh

# `make demo`: what building needs installed, then what the README's next steps use
# (the program, the libraries, the Lua module), then the weather plan (and plans/http).
# The build says one line a step; the compiler's lines go to build/demo/build.log, whose
# last lines are shown when a step fails. `make demo V=1` shows them as they come.
# Without a -j of the caller's, the build uses every core.
demo:
	@$(MAKE) --no-print-directory deps-build
	@$(MAKE) --no-print-directory demo-build
	@$(MAKE) --no-print-directory demo-run

DEMO_LOG := build/demo/build.log
demo-build:
ifeq ($(V),1)
	$(MAKE) --no-print-directory all
else
	@mkdir -p build/demo; : > $(DEMO_LOG); \
	 case " $(MAKEFLAGS) " in *" -j"*|*jobserver*) jobs="";; *) jobs="-j$$(nproc 2>/dev/null || echo 1)";; esac; \
	 step() { what=$$1; shift; printf 'demo: %s\n' "$$what"; \
	   if ! $(MAKE) --no-print-directory $$jobs "$$@" >> $(DEMO_LOG) 2>&1; then \
	     echo "demo: $$what failed; the last lines of $(DEMO_LOG) (make demo V=1 shows every line):" >&2; \
	     grep -v '^make\[' $(DEMO_LOG) | tail -n 30 >&2; exit 1; fi; }; \
	 if [ -n "$(PGO_STAMP)" ] && [ ! -e "$(PGO_STAMP)" ]; then \
	   step "training the compiler's profile (build/pgo; once per clone, a minute or two)" $(PGO_STAMP); fi; \
	 step "compiling the engine: lib/libobelus.a" lib/libobelus.a && \
	 step "compiling the command line: bin/obelus" bin/obelus && \
	 step "linking lib/libobelus.so and the Lua module lib/obelus/core.so" lib/libobelus.so lib/obelus/core.so && \
	 echo "demo: built (the compiler's lines: $(DEMO_LOG))"
endif

# The weather plan, once per branch: a branch taken, the other skipped, a join;
# then the London run's journal as a timeline, and its graph coloured by outcome
# as SVG when Graphviz's dot is there; then plans/http against a server of its own.
demo-run: all
	@echo '$$ bin/obelus check plans/weather/plan.json --tools plans/weather/tools'
	@bin/obelus check plans/weather/plan.json --tools plans/weather/tools
	@echo '$$ bin/obelus run plans/weather/plan.json --tools plans/weather/tools --input '"'"'{"city":"Lisbon"}'"'"
	@bin/obelus run plans/weather/plan.json --tools plans/weather/tools --input '{"city":"Lisbon"}'
	@echo '$$ bin/obelus run plans/weather/plan.json --tools plans/weather/tools --input '"'"'{"city":"London"}'"'"' --events stderr'
	@bin/obelus run plans/weather/plan.json --tools plans/weather/tools --input '{"city":"London"}' --events stderr
	@mkdir -p build/demo
	@bin/obelus run plans/weather/plan.json --tools plans/weather/tools --input '{"city":"London"}' \
	  --journal build/demo/weather.jsonl --overwrite >/dev/null
	@echo '$$ bin/obelus log build/demo/weather.jsonl'
	@bin/obelus log build/demo/weather.jsonl
	@if command -v dot >/dev/null 2>&1; then \
	  echo '$$ bin/obelus graph plans/weather/plan.json --journal build/demo/weather.jsonl | dot -Tsvg > build/demo/weather.svg'; \
	  bin/obelus graph plans/weather/plan.json --journal build/demo/weather.jsonl > build/demo/weather.dot && \
	  dot -Tsvg build/demo/weather.dot -o build/demo/weather.svg && \
	  echo "demo: build/demo/weather.svg (done green, skipped grey)"; \
	else echo "demo: no SVG, Graphviz's dot is not installed (make deps installs it)"; fi
	@rm -f build/demo/http.port; lua5.4 plans/http/server.lua build/demo/http.port & echo $$! > build/demo/http.pid; \
	 for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do \
	   [ -f build/demo/http.port ] && break; sleep 0.1; done; \
	 base="http://127.0.0.1:$$(cat build/demo/http.port)"; \
	 echo "\$$ bin/obelus run plans/http/plan.json --tools plans/http/tools --input '{\"base\":\"$$base\"}'  # a weather API the demo serves"; \
	 bin/obelus run plans/http/plan.json --tools plans/http/tools --input "{\"base\":\"$$base\"}"; rc=$$?; \
	 kill $$(cat build/demo/http.pid) 2>/dev/null; exit $$rc

# libFuzzer targets (clang, ASan+UBSan): reference parser, log, plans, schemas.
# Not part of make test; FUZZ_SECONDS per target (default 60).
fuzz:
	sh fuzz/run $(or $(FUZZ_SECONDS),60)

# The attack list (hostile/run.lua): bad plans, tools, journals, jobs and answers against
# bin/obelus, each outcome judged ok, crash, hang, lost or wrong, and the tally printed.
# `make hostile AREAS="files stop"` runs some of hostile/cases/ only.
.PHONY: hostile
hostile: all
	@lua5.4 hostile/run.lua $(AREAS)

# The kill harnesses: spec/cli/resume_spec.lua at 200 random SIGKILL points per plan
# shape (make test runs 20), and the fleet's, spec/cli/fleet_kill_spec.lua, at 100
# (make test runs 6), against bin/obelus. Not part of make test.
torture: all
	@mkdir -p build/results
	@OBELUS_KILL_POINTS=$(or $(KILL_POINTS),200) OBELUS_FLEET_KILL_POINTS=$(or $(FLEET_KILL_POINTS),100) \
	  OBELUS_BIN=$(CURDIR)/bin/obelus \
	  $(BUSTED) --output=TAP --cpath='lib/?.so' --lpath='lua/?.lua;lua/?/init.lua;spec/?.lua' \
	  spec/cli/resume_spec.lua spec/cli/fleet_kill_spec.lua > build/results/torture.txt 2>&1; rc=$$?; \
	  echo "torture: $$(grep -c '^ok ' build/results/torture.txt) passed," \
	    "$$(grep -c '^not ok ' build/results/torture.txt) failed"; exit $$rc
