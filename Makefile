# modeld — the two commands a fresh machine needs:
#   make run    install the runtime libraries if needed, build, and serve (and build llama.cpp for this CPU in the background)
#   make test   install what the tests need if missing (Debian packages, runtime libraries, test assets, npm clients),
#               then gofmt, go mod tidy -diff, vet and the tests (race detector where it earns its time)
# and make install: modeld into $GOBIN (default $(go env GOPATH)/bin), or PREFIX/bin with PREFIX=/usr/local
GO        ?= go
BIN       ?= bin/modeld
# onnxruntime_go needs cgo; go-nvml's header marks old calls deprecated (harmless).
export CGO_ENABLED = 1
export CGO_CFLAGS  ?= -O2 -g -Wno-deprecated-declarations
TESTFLAGS ?= -race -timeout 30m
PKGS      ?= ./...
# The packages whose tests spend their time in native inference (random-weight models
# through llama.cpp, daemons and runners built from the test binary) run without the
# race detector, which slows their Go side severalfold and finds nothing the other
# packages' race runs miss: the cache, api, pipelines, models, the llama client and
# runner are raced with fakes. The engine's concurrent parts (scheduler, slots,
# cancellation, batching) are raced once more with RACE_ENGINE. cmd/modeld alone takes
# 20-27 minutes on 2 busy cores, so their bound is an hour.
NORACE      ?= backends/llama/engine cmd/modeld
NORACEFLAGS ?= -timeout 60m
RACE_ENGINE ?= TestScheduler|TestConcurrent|TestJoinMidGeneration|TestCancel|TestBusyAndQueue|TestCloseEndsRequests
# make install's directory: PREFIX/bin when PREFIX is given, else GOBIN, else GOPATH/bin.
PREFIX    ?=
BINDIR    ?= $(if $(PREFIX),$(PREFIX)/bin,$(or $(shell $(GO) env GOBIN),$(shell $(GO) env GOPATH)/bin))
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

.PHONY: all bootstrap test-deps test-assets test-clients build install run test check fmt vet clean

all: build

bootstrap:
	scripts/bootstrap

# Debian packages the tests use (cmake, Mesa's software Vulkan device, chromium) and the
# runtime libraries with the ggml Vulkan test backend (scripts/test-deps says which test needs what).
test-deps:
	scripts/test-deps

# llama.cpp's chat templates and vocabulary-only GGUFs, for the tests (internal/testenv.LlamaAssets), and the check
# that the trained model of the shared assets is beside the checkout (scripts/check-trained-model).
test-assets:
	scripts/fetch-llama-assets
	scripts/check-trained-model

# The Gateway API Inference Extension's endpoint picker code (its config loader, metrics extractor and scheduler,
# pinned in scripts/gateway-test/go.mod, a module of its own fetched through the Go proxy) over real daemons built
# from this tree, with generated tiny models: the scenarios and the config of docs/SCALING.md.
.PHONY: test-gateway
test-gateway: test-deps build
	@mkdir -p bin/gateway-test
	$(GO) run ./scripts/gen-gguf -ctx 16384 -out bin/gateway-test/tiny.gguf
	cd scripts/gateway-test && $(GO) mod tidy -diff && $(GO) vet ./... && MODELD_BIN=$(abspath $(BIN)) MODELD_TEST_GGUF=$(abspath bin/gateway-test/tiny.gguf) \
		$(GO) test -count=1 -timeout 20m ./...

# The official API clients and agent CLIs the integration tests drive (clients/package-lock.json pins them by
# version and checksum). npm leaves the postinstall of claude-code and opencode-ai unrun, so their commands stay
# placeholders until the two scripts run; both are idempotent. Claude Code asks for Node 22 in its engines but
# runs as a native binary, so the install is not engine-strict.
test-clients:
	@if [ ! clients/node_modules/.package-lock.json -nt clients/package-lock.json ]; then cd clients && npm ci --no-audit --no-fund; fi
	@cd clients/node_modules/@anthropic-ai/claude-code && node install.cjs
	@cd clients/node_modules/opencode-ai && node ./postinstall.mjs

build:
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/modeld

install: build
	install -d "$(DESTDIR)$(BINDIR)"
	install -m 0755 $(BIN) "$(DESTDIR)$(BINDIR)/modeld"
	@echo "installed $(DESTDIR)$(BINDIR)/modeld"

# make run serves on the prebuilt llama.cpp libraries at once and, where cmake, git and g++ are found, builds
# llama.cpp for this CPU in the background (nice 19), which the next model load uses once it is installed
# (scripts/bootstrap --native-background; MODELD_NATIVE_BUILD=0 turns it off).
run: build
	scripts/bootstrap --native-background
	$(BIN) serve

fmt:
	@bad=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi

vet:
	$(GO) mod tidy -diff
	$(GO) vet ./...
	GOOS=darwin CGO_ENABLED=0 $(GO) vet ./probe/...

test: test-deps test-assets test-clients test-gateway fmt vet
	@module=$$($(GO) list -m); all=$$($(GO) list $(PKGS)); norace=""; race=""; \
	for p in $$all; do \
		case " $(NORACE) " in *" $${p#$$module/} "*) norace="$$norace $$p" ;; *) race="$$race $$p" ;; esac; \
	done; \
	set -ex; \
	if [ -n "$$race" ]; then $(GO) test $(TESTFLAGS) $$race; fi; \
	if [ -n "$$norace" ]; then $(GO) test $(NORACEFLAGS) $$norace; fi; \
	case "$$norace" in *"/backends/llama/engine"*) $(GO) test $(TESTFLAGS) -run '$(RACE_ENGINE)' $$module/backends/llama/engine ;; esac

check: test

.PHONY: cross cross-test cross-e2e

# dist/modeld-linux-arm64 and dist/modeld-darwin-arm64, with the cross compilers they need (Debian's
# gcc-aarch64-linux-gnu; Zig from npm, pinned in scripts/runtime-libs.sha256), each checked by scripts/crosscheck.
cross:
	scripts/cross

# The unit tests of the packages that need no native library, built for linux/arm64 and run under qemu-user.
cross-test:
	scripts/qemu-test

# The linux/arm64 binary end to end under qemu-user: a GGUF chat and an ONNX embedding through the arm64
# libraries (docs/PLATFORMS.md has the figures).
cross-e2e: cross
	scripts/arm64-e2e

test: cross cross-test cross-e2e

clean:
	rm -rf bin
