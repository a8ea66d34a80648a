# tgkit front door. The real build is CMake; these targets install what is missing, configure,
# build and run. `make run` and `make test` are the two commands README.md opens with.
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=
FUZZ_SECONDS ?= 60

# Debian packages: build + tests (deps), extra tools for lint and bench.
PKGS_BUILD = gcc make cmake pkg-config python3 libssl-dev libcurl4-openssl-dev \
             libmicrohttpd-dev libhiredis-dev libpcre2-dev libsqlite3-dev libqrencode-dev \
             libcmocka-dev libjansson-dev libcjson-dev redis-server clang gettext \
             libclang-rt-14-dev curl ca-certificates openssl chromium \
             python3-python-telegram-bot python3-cryptography microsocks \
             python3-prometheus-client python3-jsonschema systemd libuv1-dev libevent-dev \
             groff-base man-db gnutls-bin locales strace
PKGS_LINT  = clang-format clang-tidy cppcheck
PKGS_DOCS  = doxygen
PKGS_BENCH = wrk valgrind python3-matplotlib
PKGS_DEB   = debhelper dpkg-dev lintian fakeroot build-essential

.PHONY: all deps build run demo test bench fuzz fuzzers fuzz-long flake regen regen-check man format lint clean asan-test tsan-test \
        abi-update docs deps-docs \
        deps-lint deps-bench deb deb-test deps-deb

all: build

deps:
	@scripts/deps.sh $(PKGS_BUILD)

deps-docs:
	@scripts/deps.sh $(PKGS_DOCS)

deps-lint:
	@scripts/deps.sh $(PKGS_LINT)

deps-deb:
	@scripts/deps.sh $(PKGS_BUILD) $(PKGS_DEB)

# Debian packages into $(BUILD)/deb, lintian-checked (scripts/deb.sh; packaging/debian/).
deb: deps-deb
	JOBS=$(JOBS) scripts/deb.sh $(BUILD)/deb

# Install, use and purge them (as root; ctest install/deb, packages left uninstalled).
deb-test: deb $(BUILD)/CMakeCache.txt
	cd $(BUILD) && TGKIT_DEB_DIR=$(abspath $(BUILD))/deb ctest -R '^install/deb$$' --output-on-failure

deps-bench:
	@scripts/deps.sh $(PKGS_BENCH)

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS)

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	@scripts/run.sh $(BUILD)

demo: build
	@scripts/demo.sh $(BUILD)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# clang, so the same sanitizer build also yields the libFuzzer binaries CI smokes.
asan-test: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=Debug \
	    -DTGKIT_SANITIZE=address,undefined -DTGKIT_WERROR=ON -DTGKIT_BUILD_BENCH=OFF \
	    -DTGKIT_FUZZ=ON $(CMAKE_ARGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)

# ThreadSanitizer over every test: the proxy's workers, resolver threads and shared
# anti-replay table, the bot's dispatch pool, flood control and webhook server.
tsan-test: deps
	cmake -S . -B $(TSAN_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DTGKIT_SANITIZE=thread -DTGKIT_WERROR=ON -DTGKIT_BUILD_BENCH=OFF \
	    -DTGKIT_BUILD_EXAMPLES=OFF $(CMAKE_ARGS)
	cmake --build $(TSAN_BUILD) -j $(JOBS)
	cd $(TSAN_BUILD) && TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
	    ctest --output-on-failure -j $(JOBS)

bench: build deps-bench
	@scripts/bench.sh $(BUILD)

# The libFuzzer binaries, with ASan+UBSan (clang).
fuzzers: deps
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	    -DTGKIT_FUZZ=ON -DTGKIT_SANITIZE=address,undefined -DTGKIT_BUILD_BENCH=OFF \
	    -DTGKIT_BUILD_EXAMPLES=OFF
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzzers

fuzz: fuzzers
	@scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# Every target for FUZZ_LONG_SECONDS (default ten minutes) from its corpus, the new inputs
# merged back minimized, and the table in fuzz/RESULTS.md (FUZZ_TARGETS="a b" for some).
FUZZ_LONG_SECONDS ?= 600
fuzz-long: fuzzers
	FUZZ_REPORT=fuzz/RESULTS.md FUZZ_MERGE=1 scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_LONG_SECONDS)

# The whole suite FLAKE_RUNS times beside two CPU burners; per-test failure counts.
FLAKE_RUNS ?= 10
flake: build
	@scripts/flake.sh $(FLAKE_RUNS) $(BUILD)

# libtgbot's API reference from the headers (Doxygen): $(BUILD)/docs/html/index.html.
docs: deps-docs
	@scripts/docs.sh $(BUILD)

# The page: BOTAPI_HTML=path, else ../shared/botapi/, else a curl download into $(BUILD)/
# (scripts/botapi-page.sh says what to do when none works).
regen:
	@page=$$(scripts/botapi-page.sh $(BUILD)) && echo "regen: from $$page" && \
	    python3 tools/botapi-gen/botapi_gen.py "$$page"
	$(MAKE) --no-print-directory format-generated

# tgproxy.toml(5) from the loader's key tables (ctest install/man_toml_keys says when it is due).
man: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target toml-keys
	python3 tools/man/gen_toml_man.py $(BUILD)/toml-keys docs/tgproxy.md docs/man/tgproxy.toml.5

regen-check:
	@scripts/regen-check.sh

# Refresh the committed list of libtgbot's exported symbols after adding API on purpose
# (ctest bot/abi_symbols compares against it; docs/abi.md says when removing is allowed).
abi-update: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS) --target tgbot
	@scripts/abi-symbols.sh update $(BUILD)/libtgbot.so abi/libtgbot.symbols

format: deps-lint
	@git ls-files '*.c' '*.h' | grep -v '\.gen\.' | xargs clang-format -i
	@echo "formatted $$(git ls-files '*.c' '*.h' | grep -vc '\.gen\.') files"

format-generated:
	@ls src/bot/api/*.gen.[ch] include/tgbot/api*.h 2>/dev/null | xargs -r clang-format -i

lint: deps-lint build
	@scripts/lint.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
