# surflare-watchdog — build, test and package.
#
# The two commands a fresh Debian 12 machine needs (as root):
#   make setup demo    # the daemon against the simulated lab, with its web UI
#   make setup test    # every test, root-only ones included

SHELL   := /bin/bash
export PATH := /usr/local/go/bin:$(PATH)
GO      ?= go
# VERSION is MAJOR.MINOR.PATCH-rN, valid for both opkg and apk (apk refuses
# 0.1.0-272): the last v-tag (or 0.1.0) and the commit count as the release,
# so every commit's packages upgrade the previous ones under either manager.
VERSION ?= $(shell v=$$(git describe --tags --abbrev=0 2>/dev/null | sed 's/^v//'); echo $${v:-0.1.0}-r$$(git rev-list --count HEAD 2>/dev/null || echo 0))
ARCH    ?= x86_64
BUILD   := build
BIN     := $(BUILD)/$(ARCH)/surflare-watchdog
LDFLAGS := -s -w -X main.version=$(VERSION)

# GOARCH (and GOMIPS) for each OpenWrt architecture name.
goarch_x86_64  := amd64
goarch_aarch64 := arm64
goarch_arm     := arm
goarch_mipsel  := mipsle
goarch_mips    := mips
GOARCH_FOR     = $(goarch_$(ARCH))

.PHONY: all build setup test test-short fuzz-quick lint tidy-check demo bench ipk apk sizes install clean

all: build

## build: static binary for ARCH (default x86_64): no cgo, trimmed paths, version stamped from git.
build:
	@test -n "$(GOARCH_FOR)" || { echo "unknown ARCH=$(ARCH) (x86_64 aarch64 arm mipsel mips)"; exit 2; }
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH_FOR) GOMIPS=softfloat \
		$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./src/cmd/surflare-watchdog
	@ls -l $(BIN) | awk '{print "binary: " $$NF " " $$5 " bytes"}'

## setup: install what the tests and the demo need on Debian (apt packages, Go modules).
setup:
	bash scripts/setup-debian.sh

## test: every test; root-only tests (namespaces, nftables, the lab) run when root.
## The packages are built first so the package tests check what `make ipk` and `make apk` really make.
## The OpenWrt box tests run on their own with -v: their output is the
## checklist of a router owner's actions (and the fw4 leak table).
BOX_TESTS := ./src/boxtest ./src/luciapp
test: ipk apk tidy-check
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 30m $$($(GO) list ./... | grep -v -e /src/boxtest -e /src/luciapp)
	$(GO) test -count=1 -timeout 20m -v $(BOX_TESTS)
	$(MAKE) --no-print-directory fuzz-quick

## test-short: the tests that need neither root nor the lab.
test-short:
	$(GO) test -short -count=1 ./...

## fuzz-quick: a short run of every fuzz target (the codecs and parsers). The budget is a
## count of executions, not a duration: Go 1.26's fuzz coordinator can report a bare
## "context deadline exceeded" failure when a -fuzztime duration ends while a worker is
## busy (golang/go#75804, fixed in 1.27; CI hit it on a loaded machine). A count has no
## deadline to race. FUZZTIME=30s (or 200000x) overrides it.
fuzz-quick:
	@for t in $$(grep -rl --include='*_test.go' -E '^func Fuzz' src | xargs -n1 dirname | sort -u); do \
		for f in $$(grep -h -oE '^func (Fuzz[A-Za-z0-9_]+)' $$t/*_test.go | awk '{print $$2}'); do \
			echo "fuzz $$t $$f"; \
			$(GO) test -run='^$$' -fuzz="^$$f\$$" -fuzztime=$${FUZZTIME:-50000x} ./$$t || exit 1; \
		done; \
	done

## tidy-check: go.mod and go.sum are what `go mod tidy` makes (a test run would
## otherwise rewrite them in a clean checkout).
tidy-check:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run 'go mod tidy'"; exit 1; }

## lint: gofmt, go mod tidy, go vet, and go vet for the router architectures so they keep compiling.
lint: tidy-check
	@bad=$$(gofmt -l src); if [ -n "$$bad" ]; then echo "gofmt needed:"; echo "$$bad"; exit 1; fi
	$(GO) vet ./...
	GOARCH=arm64 $(GO) vet ./...
	GOARCH=arm $(GO) vet ./...
	GOARCH=mipsle $(GO) vet ./...
	sh scripts/shellcheck.sh

## demo: the daemon and its web UI against the simulated lab (needs root).
demo:
	$(GO) build -o $(BUILD)/surflare-lab ./src/cmd/surflare-lab
	$(BUILD)/surflare-lab demo $(DEMO_ARGS)

## bench: detection/recovery/leak/footprint benchmark on the lab, ours against the seed's
## parameters (QUICK=1: the short version CI runs; BENCH_ARGS: see surflare-bench --help).
## Writes bench/out/results.md, results.json and latency.svg; needs root.
bench: ipk
	$(GO) run ./src/cmd/surflare-bench --out bench/out --bin $(BIN) --ipk '$(BUILD)/ipk/surflare-watchdog_*_$(PKGARCH).ipk' $(if $(QUICK),--quick) $(BENCH_ARGS)

## ipk: OpenWrt packages for ARCH without an SDK (PKGARCH names the opkg/apk architecture,
## e.g. aarch64_cortex-a53; by default the common one for ARCH, as mkipk's defaultPkgArch).
pkgarch_x86_64  := x86_64
pkgarch_aarch64 := aarch64_generic
pkgarch_arm     := arm_cortex-a7_neon-vfpv4
pkgarch_mipsel  := mipsel_24kc
pkgarch_mips    := mips_24kc
PKGARCH ?= $(or $(pkgarch_$(ARCH)),$(ARCH))
ipk: build
	@rm -f $(BUILD)/ipk/surflare-watchdog_*_$(PKGARCH)*.ipk $(BUILD)/ipk/luci-app-surflare_*_all.ipk
	$(GO) run ./src/cmd/mkipk build --version $(VERSION) --arch $(PKGARCH) --bin $(BIN) --out $(BUILD)/ipk

## apk: the same packages as apk v3 files for OpenWrt 25.12 (apk-tools 3),
## same ARCH and PKGARCH, in build/apk/PKGARCH/ (apk file names carry no
## architecture); install with `apk add --allow-untrusted` (unsigned).
apk: build
	@rm -f $(BUILD)/apk/$(PKGARCH)/surflare-watchdog-*.apk $(BUILD)/apk/$(PKGARCH)/luci-app-surflare-*.apk
	$(GO) run ./src/cmd/mkipk build --format apk --version $(VERSION) --arch $(PKGARCH) --bin $(BIN) --out $(BUILD)/apk/$(PKGARCH)

## sizes: binary, ipk and apk for every router architecture, and a table of
## their sizes (SIZES_ARCHS to choose; default package architectures).
SIZES_ARCHS ?= x86_64 aarch64 arm mipsel
sizes:
	@for a in $(SIZES_ARCHS); do $(MAKE) --no-print-directory ipk apk ARCH=$$a >/dev/null || exit 1; done
	$(GO) run ./src/cmd/mkipk sizes $(BUILD)

## install: laptop install (role laptop) with the service file for this init system
## (DESTDIR, PREFIX and INIT=systemd|openrc|runit are honoured).
install: build
	DESTDIR="$(DESTDIR)" PREFIX="$(PREFIX)" INIT="$(INIT)" sh scripts/install.sh $(BIN)

clean:
	rm -rf $(BUILD)
