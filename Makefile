# reconcilekit — kubebuilder-style targets. `make help` lists them.
#
# The test toolchain (etcd, kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl, kwok, kwokctl, controller-gen, golangci-lint, helm,
# kind and the kind node's binaries) is built from source by hack/tools.sh
# into a cache outside the checkout: no binary is downloaded.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

# Where the toolchain lives (computed, nothing is built by reading it).
TOOLS_BIN ?= $(shell bash hack/tools.sh --dir)
export TOOLS_BIN
CONTROLLER_GEN := $(TOOLS_BIN)/controller-gen
# golangci-lint with the Kubernetes API linter compiled in (hack/tools/lint).
GOLANGCI_LINT := $(TOOLS_BIN)/golangci-lint
KUBECTL := $(TOOLS_BIN)/kubectl
# envtest finds etcd and kube-apiserver here.
export KUBEBUILDER_ASSETS := $(TOOLS_BIN)

# The local cluster's kubeconfig (never the user's ~/.kube/config).
CLUSTER_KUBECONFIG ?= $(CURDIR)/.cluster/reconcilekit.kubeconfig

# Go modules: the library at the root, and nested modules for the code whose
# dependencies the library must not carry (examples/, bench/, docs/ and e2e/,
# each built against this checkout through a replace directive; the root's
# internal/leanmod test keeps its go.mod lean). e2e/ holds only e2e-tagged
# code, so the plain go targets run in $(MODULES) and test-e2e runs e2e/.
# hack/tools is the toolchain's own module, built by hack/tools.sh.
MODULES := . examples bench docs packaging kubebuilderplugin
E2E_MODULE := e2e
# Every module is built with its own go.mod: a local go.work would mix the
# nested modules' requirements into the library's.
export GOWORK := off
# One build configuration for vet, the tests, the e2e suite's operator binary
# and the kind image's static binary (hack/image.sh), so that each package
# compiles once in a run: with cgo on (Go's default where gcc is installed),
# the image's CGO_ENABLED=0 build compiled the operator and all its
# dependencies a second time (4.8 minutes of a cold run). Nothing here needs
# cgo; set CGO_ENABLED=1 for -race.
export CGO_ENABLED ?= 0
# $(call each-module,CMD[,DIRS]): run CMD in each module directory (default
# $(MODULES)); fail once all have run if any failed.
each-module = failed=; for m in $(or $(2),$(MODULES)); do echo ">>> module $$m"; \
	(cd "$$m" && $(1)) || failed="$$failed $$m"; done; \
	if [[ -n "$$failed" ]]; then echo "failed in module(s):$$failed" >&2; exit 1; fi

WEBAPP := examples/webapp
# Everything `make generate manifests` writes; `make test` fails when it is stale.
GENERATED := '*zz_generated*' internal/testapi/crd internal/testapi/v1/applyconfiguration $(WEBAPP)/config docs/getting-started/config docs/quickstart/config
# The API packages we ship, checked by the Kubernetes API linter
# (.golangci-kal.yml). It runs from each directory, so from whichever Go
# module holds it.
API_DIRS := $(WEBAPP)/api docs/getting-started/api internal/testapi
GO_TEST_FLAGS ?=

##@ General

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make \033[36m<target>\033[0m\n"} \
		/^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } \
		/^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Tooling

.PHONY: tools
tools: ## Build the test toolchain from source into the cache (first run ~20 min on two cores, then seconds).
	@bash hack/tools.sh >/dev/null
	@mkdir -p bin && ln -sfn "$(TOOLS_BIN)" bin/tools

.PHONY: envtest-assets
envtest-assets: tools ## Print the KUBEBUILDER_ASSETS directory (last line) for a plain `go test`.
	@echo "$(TOOLS_BIN)"

##@ Development

.PHONY: generate
generate: tools ## Generate deepcopy code (controller-gen object) and the test API's apply configurations (controller-gen applyconfiguration).
	$(CONTROLLER_GEN) object:headerFile=hack/boilerplate.go.txt applyconfiguration:headerFile=hack/boilerplate.go.txt paths=./internal/testapi/...
	cd examples && $(CONTROLLER_GEN) object:headerFile=../hack/boilerplate.go.txt paths=./webapp/api/...
	cd docs && $(CONTROLLER_GEN) object:headerFile=../hack/boilerplate.go.txt paths=./getting-started/...
	cd docs && $(CONTROLLER_GEN) object:headerFile=../hack/boilerplate.go.txt paths=./quickstart/...

.PHONY: manifests
manifests: tools ## Generate CRDs, RBAC and webhook manifests from markers (controller-gen).
	$(CONTROLLER_GEN) crd:crdVersions=v1 paths=./internal/testapi/... output:crd:dir=internal/testapi/crd
	cd examples && $(CONTROLLER_GEN) rbac:roleName=manager-role crd webhook paths=./webapp/... \
		output:crd:artifacts:config=webapp/config/crd/bases \
		output:rbac:artifacts:config=webapp/config/rbac \
		output:webhook:artifacts:config=webapp/config/webhook
	cd docs && $(CONTROLLER_GEN) rbac:roleName=manager-role crd paths=./getting-started/... \
		output:crd:artifacts:config=getting-started/config/crd/bases \
		output:rbac:artifacts:config=getting-started/config/rbac
	cd docs && $(CONTROLLER_GEN) crd paths=./quickstart/... output:crd:artifacts:config=quickstart/config/crd/bases

.PHONY: verify-modules
verify-modules: ## Fail when two modules build one dependency at different versions (each would compile it apart).
	@bash hack/modversions.sh $(MODULES) $(E2E_MODULE) hack/tools

.PHONY: verify-generated
verify-generated: generate manifests ## Fail when generated files differ from what is committed.
	@if [[ -n "$$(git status --porcelain -- $(GENERATED))" ]]; then \
		echo "generated files are out of date; run 'make generate manifests' and commit:"; \
		git status --porcelain -- $(GENERATED); \
		git --no-pager diff --stat; exit 1; \
	fi

.PHONY: fmt
fmt: ## Run go fmt (every module).
	@$(call each-module,go fmt ./...)

.PHONY: vet
vet: ## Run go vet in every module (with the e2e build tag, so e2e code is checked too).
	@$(call each-module,go vet -tags e2e ./...,$(MODULES) $(E2E_MODULE))

# --allow-serial-runners: golangci-lint refuses to start while another
# instance holds its lock in $TMPDIR ("parallel golangci-lint is running"),
# which failed a cold make test at 2026-12-07 22:18 because an editor's lint
# ran beside it; it now waits for the lock instead.
.PHONY: lint
lint: tools ## Run golangci-lint (every module), the kube-api-linter, and the API compatibility check (api-check).
	@$(call each-module,$(GOLANGCI_LINT) run --allow-serial-runners --build-tags e2e ./...,$(MODULES) $(E2E_MODULE))
	@failed=; for d in $(API_DIRS); do echo ">>> kube-api-linter $$d"; \
		(cd "$$d" && $(GOLANGCI_LINT) run --allow-serial-runners -c "$(CURDIR)/.golangci-kal.yml" ./...) || failed="$$failed $$d"; done; \
		if [[ -n "$$failed" ]]; then echo "kube-api-linter failed in:$$failed" >&2; exit 1; fi
	@$(MAKE) --no-print-directory api-check

# The library's exported API against the committed snapshot (apidiff;
# docs/compatibility.md, "The API check").
.PHONY: api-check
api-check: tools ## Fail on an incompatible change to the library's exported API (apidiff against hack/api/reconcilekit.export).
	@bash hack/apicheck.sh check

.PHONY: api-snapshot
api-snapshot: tools ## Rewrite the exported API snapshot after an intended incompatible change (then add its CHANGELOG.md line).
	@bash hack/apicheck.sh write

##@ Test

.PHONY: test-unit
test-unit: ## Unit tests only (go test -short: no control plane).
	@$(call each-module,go test -short -count=1 $(GO_TEST_FLAGS) ./...)

.PHONY: test-integration
# Every benchmark runs once too (-benchtime=1x), so the correctness checks
# inside them (b.Fatal) run in CI.
test-integration: tools ## Unit and integration tests against envtest (real etcd + kube-apiserver), and every benchmark once.
	@$(call each-module,go test -count=1 -timeout 20m -bench . -benchtime 1x $(GO_TEST_FLAGS) ./...)

# On kwok the kind-only tests (TestKind*: make test-kind runs them) are left
# out rather than reported as skipped.
E2E_SKIP := $(if $(filter-out kwok,$(or $(E2E_PROVIDER),kwok)),,-skip '^TestKind')
.PHONY: test-e2e
test-e2e: tools ## End-to-end tests on a local kwok cluster (E2E_PROVIDER=kwok|kind|existing).
	cd $(E2E_MODULE) && go test -tags e2e -count=1 -timeout 30m -v $(E2E_SKIP) $(GO_TEST_FLAGS) ./...

# The guide's chapters continue the quickstart's project and cluster: one walk.
GUIDE_PAGES := docs/quickstart.md $(sort $(wildcard docs/guide/*.md))
.PHONY: test-docs test-docs-guide test-docs-kubebuilder
test-docs: test-docs-guide test-docs-kubebuilder ## Follow docs/quickstart.md, then docs/guide/, and docs/adopting-kubebuilder.md as a reader: run their commands, write their files, until a Cache is Ready and the kubebuilder scaffold's make test passes.

test-docs-guide: tools ## The quickstart and the guide's chapters, walked as a reader (its operator binds 127.0.0.1:9443).
	bash hack/docwalk.sh $(GUIDE_PAGES)

test-docs-kubebuilder: tools ## docs/adopting-kubebuilder.md, walked as a reader (its scaffold runs without webhooks: no fixed port).
	bash hack/docwalk.sh docs/adopting-kubebuilder.md

# make test runs every test in two chains at once (make -j2), every line of
# output prefixed with its chain and the time, with nothing in common but the
# toolchain (hack/tools.sh builds it once under a lock, the other chain waits):
#   test-chain-local: the checks that need no cluster (generated files, one
#      version of each dependency, vet, lint, every unit and integration test;
#      test-integration runs the -short ones too, so test-unit is not run
#      apart), then the clusters on this host: the e2e suite on kwok, the
#      guide's walk, the README's make demo commands. Each of those binds
#      127.0.0.1:9443, so one after another. The checks defer metrics-server
#      (TOOLS_DEFER): only the e2e suite runs it, and the other chain builds it.
#   test-chain-node: the engine, the node image, metrics-server and kubebuilder
#      (kind-build), the kind suite and the README's kind commands (test-node),
#      then the kubebuilder walk (no fixed port).
# Until 2026-12-08 the two were phases (checks beside kind-build, then the kwok
# clusters beside test-node): the node chain then waited about 15 minutes for
# the checks, and the kwok chain 8 for the kind suite. The unit tests stay out
# of vet's way: run beside it (tried at f50cdad), both compiled the same
# dependencies at once (vet took 20 minutes cold instead of 12). make
# test-local is make test without kind (no engine, no node image), one target
# after another.
.PHONY: test test-chain-local test-chain-node
test: ## Everything CI runs: generated files, vet, lint, unit, integration, e2e on kwok and on kind, the README's commands, the docs walks.
	@$(MAKE) --no-print-directory -j2 test-chain-local.chain test-chain-node.chain

test-chain-local:
	@TOOLS_DEFER=metrics-server $(MAKE) --no-print-directory test-checks
	@$(MAKE) --no-print-directory test-e2e test-docs-guide test-readme-demo

test-chain-node: kind-build test-node test-docs-kubebuilder

.PHONY: test-checks
test-checks: verify-generated verify-modules vet lint test-integration ## Generated files, one version of each dependency, vet, lint, every unit and integration test (no cluster).

.PHONY: test-clusters
test-clusters: test-e2e test-docs test-readme-demo ## The e2e suite on kwok, the docs walks, the README's make demo commands.

.PHONY: test-node
test-node: test-kind test-readme-kind ## What a real node shows: the kind suite, then the README's kind commands.

.PHONY: test-local
test-local: test-checks test-clusters ## make test without kind: generated files, vet, lint, unit, integration, e2e on kwok, the docs walks.

# %.chain: make % (its prerequisites one at a time) with every output line
# prefixed "[% HH:MM:SS] ", so a log shows where a run's time went.
%.chain:
	@MAKEFLAGS="$(filter-out -j% --jobserver%,$(MAKEFLAGS))" $(MAKE) --no-print-directory $* 2>&1 | \
		while IFS= read -r line; do printf '[%s %(%H:%M:%S)T] %s\n' '$*' -1 "$$line"; done

##@ Benchmarks

BENCH_N ?= 100
# BENCH_ARGS: more flags of bench/cmd/bench (-repeat=K rounds, 3 by default; -fastpaths=statuspatch,verdicts,intern,createonly
# or all, to measure what each fast path saves; -profile-dir=DIR, -reconcilers=N, -unrelated=N; -h lists them).
BENCH_ARGS ?=
.PHONY: bench
bench: tools ## Requests, CPU, latency and memory vs an idiomatic controller-runtime peer and the tutorial baseline, 3 interleaved rounds (medians, ranges); writes docs/performance.md and its figures (BENCH_N=100).
	cd bench && go run ./cmd/bench -n $(BENCH_N) $(BENCH_ARGS)

# The scale run, not part of make test: reconcilekit converges
# BENCH_SCALE_N WebApps from zero, each operator restarts over them,
# reconcilekit deletes them. Written to its own section of
# docs/performance.md and its figures; try it small with BENCH_SCALE_N=300.
BENCH_SCALE_N ?= 10000
BENCH_SCALE_ARGS ?=
.PHONY: bench-scale
bench-scale: tools ## 10,000 WebApps converged, each operator restarting over them, deleted; a section of docs/performance.md and figures (BENCH_SCALE_N=10000; budget 75 min on 2 cores).
	cd bench && go run ./cmd/bench -scale -simulated-rollouts -n $(BENCH_SCALE_N) $(BENCH_SCALE_ARGS)

# The sharding run, not part of make test: reconcilekit converges
# BENCH_SHARDS_N WebApps, then 1, 2 and 4 replicas with --sharding restart
# over them together (API server with the ShardedListAndWatch gate). Written
# to its own section of docs/performance.md.
BENCH_SHARDS_N ?= 2000
BENCH_SHARDS ?= 1,2,4
BENCH_SHARDS_ARGS ?=
.PHONY: bench-shards
bench-shards: tools ## 1, 2 and 4 sharded replicas over one fleet: heap, cached objects, requests and time until idle per replica; a section of docs/performance.md (BENCH_SHARDS_N=2000).
	cd bench && go run ./cmd/bench -shards $(BENCH_SHARDS) -simulated-rollouts -n $(BENCH_SHARDS_N) $(BENCH_SHARDS_ARGS)

##@ Local cluster

.PHONY: cluster-up
cluster-up: tools ## Start the local cluster (kwokctl --runtime binary); kubeconfig in .cluster/reconcilekit.kubeconfig.
	@bash hack/cluster.sh up

.PHONY: cluster-down
cluster-down: ## Stop the local cluster and every process it started.
	@bash hack/cluster.sh down

##@ Example operator (examples/webapp)

.PHONY: build
build: ## Build the WebApp operator binary into bin/.
	cd examples && go build -o ../bin/webapp-operator ./webapp

# Against an arbitrary cluster the webhooks are off (nothing routes to this
# host) and the route registry lives in "default"; `make demo` runs the full
# operator, webhooks included, on the local cluster.
RUN_ARGS ?= --enable-webhooks=false --namespace=default --metrics-bind-address=0
.PHONY: run
run: ## Run the WebApp operator against the current kubeconfig (RUN_ARGS to change flags).
	cd examples && go run ./webapp $(RUN_ARGS)

.PHONY: demo
demo: tools ## Local cluster up, WebApp operator running as its ServiceAccount, sample Ready.
	@bash hack/demo.sh

.PHONY: install
install: tools ## Install the WebApp CRD into the current cluster.
	$(KUBECTL) apply --server-side -k $(WEBAPP)/config/crd

.PHONY: uninstall
uninstall: tools ## Remove the WebApp CRD from the current cluster.
	$(KUBECTL) delete --ignore-not-found -k $(WEBAPP)/config/crd

.PHONY: deploy
deploy: tools ## Deploy the WebApp operator (config/default) to the current cluster; returns once it is rolled out and its webhooks admit WebApps.
	@bash hack/deploy.sh $(KUBECTL)

.PHONY: undeploy
undeploy: tools ## Remove the WebApp operator from the current cluster.
	$(KUBECTL) delete --ignore-not-found -k $(WEBAPP)/config/default

IMG ?= reconcilekit/webapp-operator:dev
.PHONY: docker-build
docker-build: ## Build the operator image (needs a running container engine).
	@if ! docker info >/dev/null 2>&1; then \
		echo "docker-build: no container engine is running on this machine; the image cannot be built here."; \
		echo "Use 'make run' or 'make demo' (host process), or run this target where Docker works."; exit 1; \
	fi
	docker build -t $(IMG) -f $(WEBAPP)/Dockerfile .

##@ kind

# A real one-node kind cluster, built offline: hack/engine.sh builds a private
# dockerd (moby v2), containerd and runc from the Go module proxy and runs them
# with their own state in .cluster/engine; hack/kind.sh assembles the node
# image for v1.37.2 from parts built here and creates the cluster, whose
# apiserver listens on 127.0.0.1. Its kubeconfig is a file of its own:
KIND_CLUSTER_NAME ?= reconcilekit-kind
KIND_KUBECONFIG := $(CURDIR)/.cluster/$(KIND_CLUSTER_NAME).kind-kubeconfig

.PHONY: kind-up
kind-up: tools ## Private engine, offline-built node image, kind cluster, operator+web images loaded (cold ~35 min, warm ~2 min).
	@KIND_CLUSTER_NAME=$(KIND_CLUSTER_NAME) bash hack/kind.sh up >/dev/null
	@KIND_CLUSTER_NAME=$(KIND_CLUSTER_NAME) IMG=$(IMG) bash hack/image.sh load
	@echo "kind cluster $(KIND_CLUSTER_NAME) is up; deploy with: KUBECONFIG=$(KIND_KUBECONFIG) make deploy"

.PHONY: kind-down
kind-down: ## Delete the kind cluster and stop the private engine.
	@KIND_CLUSTER_NAME=$(KIND_CLUSTER_NAME) bash hack/kind.sh down

.PHONY: kind-load
kind-load: ## Build the operator image (and the WebApps' web image) offline and `kind load` them.
	@KIND_CLUSTER_NAME=$(KIND_CLUSTER_NAME) IMG=$(IMG) bash hack/image.sh load

.PHONY: kind-deploy
kind-deploy: kind-load ## kind-load, then `make deploy` to the kind cluster.
	@KUBECONFIG=$(KIND_KUBECONFIG) $(MAKE) --no-print-directory deploy

# Everything the kind suite needs built, before its clock starts: the engine
# (which needs nothing else, so it builds while hack/tools.sh may still run
# for the other chain), then the toolchain (kind and the node's binaries are
# among its tools) and the node image; then metrics-server (for the e2e suite
# on kwok, which make test runs on the other chain) and kubebuilder (for the
# kubebuilder walk).
.PHONY: kind-build
kind-build: ## Build the engine, the toolchain (kind and the node's binaries included), the node image, then metrics-server and kubebuilder (cold ~30 min beside make tools, then seconds).
	@bash hack/engine.sh build >/dev/null
	@TOOLS_DEFER=metrics-server bash hack/tools.sh >/dev/null
	@TOOLS_DEFER=metrics-server bash hack/kind.sh image >/dev/null
	@TOOLS_DEFER= bash hack/tools.sh >/dev/null
	@bash hack/kubebuildertool/build.sh >/dev/null

# The e2e suite on a kind cluster of its own (E2E_CLUSTER_NAME), created by
# hack/kind.sh on the private engine (no kind-up needed). KIND_TESTS picks the
# tests: by default what only a real node shows (e2e/kind_test.go, the OLM
# bundle and the Helm chart installed on the node, a namespace deleted with
# real pods in it), which make test runs; KIND_TESTS=. runs the whole suite.
KIND_TESTS ?= ^(TestKind.*|TestWebAppLifecycle)$$
.PHONY: test-kind
test-kind: kind-build ## E2E suite on kind (hack/kind.sh; the operator deployed from its offline-built image; KIND_TESTS=. for every test).
	cd $(E2E_MODULE) && E2E_PROVIDER=kind E2E_CLUSTER_NAME=$${E2E_CLUSTER_NAME:-reconcilekit-kind-e2e} \
		E2E_OPERATOR_IMAGE=$(IMG) go test -tags e2e -count=1 -timeout 45m -v -run '$(KIND_TESTS)' $(GO_TEST_FLAGS) ./...

# The README's laptop path (KIND_BINARY: Docker and kind, images from the
# repo's Dockerfiles), run here against the private engine and our node image
# (hack/kind-docker.sh says what differs on a laptop).
.PHONY: test-kind-docker
test-kind-docker: tools ## The README's Docker-and-kind command, on the private engine (docker build of the repo's Dockerfiles, kind load, the e2e suite).
	bash hack/kind-docker.sh

.PHONY: test-readme-demo
test-readme-demo: tools ## The README's make demo and make demo DEMO_SHARDS=3 as a reader types them (hack/readme-demo.sh): samples Ready, then make cluster-down leaves nothing.
	bash hack/readme-demo.sh

.PHONY: test-readme-kind
test-readme-kind: tools ## The README's kind commands as a reader types them (hack/readme-kind.sh): kind-up, deploy, samples Ready, kind-down.
	bash hack/readme-kind.sh

##@ Observability

# The WebApp operator's monitoring (examples/webapp/config/prometheus and
# config/grafana). `make test` already runs all of it: the promtool tests in
# test-unit, the config check in test-integration, TestOperatorAlerts in
# test-e2e. These targets run one part on its own.
.PHONY: prometheus
prometheus: ## Install Debian's prometheus package (server and promtool) if missing (hack/prometheus.sh).
	@bash hack/prometheus.sh >/dev/null

.PHONY: test-alerts
test-alerts: prometheus tools ## promtool check/test of every alert, and config/prometheus agreeing with config/default.
	cd examples && go test -count=1 -run 'TestAlertRules|TestEveryAlertIsUnitTested|TestPrometheusConfigFindsTheManager' ./webapp/

.PHONY: test-alerts-e2e
test-alerts-e2e: prometheus tools ## A real Prometheus scrapes the operator on the local cluster; WebAppStalled fires and resolves.
	cd $(E2E_MODULE) && go test -tags e2e -count=1 -timeout 15m -v -run TestOperatorAlerts ./...

##@ Reliability

# The chaos suite (e2e/chaos_*.go, issues 18 and 31): ten fault scenarios over the
# WebApp operator, each ending with the same invariants. `make test-e2e`
# runs their short form; this runs the long form and rewrites
# docs/reliability.md with its figures. E2E_CHAOS_APPS=N resizes every
# scenario, E2E_CHAOS_SEED=N reseeds them.
CHAOS_REPORT ?= $(CURDIR)/docs/reliability.md
# The WebApp dashboard's picture in docs/webapp-tour.md: the alert e2e
# draws every panel from its Prometheus (e2e/dashboard_png.go) and keeps it.
.PHONY: dashboard-png
dashboard-png: tools ## Redraw docs/images/webapp-dashboard.png from a run of the alert e2e (its Prometheus scraping the operator).
	mkdir -p docs/images
	cd $(E2E_MODULE) && E2E_DASHBOARD_PNG=$(CURDIR)/docs/images/webapp-dashboard.png \
		go test -tags e2e -count=1 -timeout 30m -v -run TestOperatorAlerts $(GO_TEST_FLAGS) ./...

.PHONY: chaos
chaos: tools ## The chaos suite's long form on a local kwok cluster; writes docs/reliability.md.
	cd $(E2E_MODULE) && E2E_CHAOS=long E2E_CHAOS_REPORT=$(CHAOS_REPORT) \
		go test -tags e2e -count=1 -timeout 120m -v -run TestChaos $(GO_TEST_FLAGS) ./...

##@ Packaging

# The WebApp operator's OLM bundle, file-based catalog and Helm chart. The
# nested module packaging/ generates the bundle (operator-framework/api) and
# tests all three in `make test`: every operator-framework validator suite,
# the chart against config/default, helm lint, and installs on envtest.
BUNDLE_VERSION ?= 0.1.0
BUNDLE_CHANNELS ?= candidate
BUNDLE_REPLACES ?=
BUNDLE_SKIP_RANGE ?=
HELM := $(TOOLS_BIN)/helm
HELM_RELEASE ?= webapp
HELM_NAMESPACE ?= webapp-system
HELM_ARGS ?=

.PHONY: bundle
bundle: ## Generate the OLM bundle (examples/webapp/bundle, bundle.Dockerfile), its catalog and the chart's CRD from config/.
	cd packaging && go run ./cmd/bundle -version $(BUNDLE_VERSION) -channels $(BUNDLE_CHANNELS) \
		-replaces '$(BUNDLE_REPLACES)' -skip-range '$(BUNDLE_SKIP_RANGE)'

.PHONY: bundle-validate
bundle-validate: ## Run every operator-framework validator suite on the bundle, and check it is up to date.
	cd packaging && go test -short -count=1 -run '^TestBundle(Validators|UpToDate)$$' -v .

.PHONY: helm-lint
helm-lint: tools ## helm lint --strict the chart (also run by packaging's tests with Helm's library).
	$(HELM) lint --strict --namespace $(HELM_NAMESPACE) charts/webapp-operator

.PHONY: helm-template
helm-template: tools ## Render the chart as `make helm-install` would install it.
	$(HELM) template $(HELM_RELEASE) charts/webapp-operator --namespace $(HELM_NAMESPACE) --include-crds $(HELM_ARGS)

.PHONY: helm-install
helm-install: tools ## Install or upgrade the chart in the current cluster (namespace created with Pod Security "restricted").
	$(KUBECTL) create namespace $(HELM_NAMESPACE) --dry-run=client -o yaml | \
		$(KUBECTL) label --local -f - pod-security.kubernetes.io/enforce=restricted -o yaml | $(KUBECTL) apply -f -
	$(HELM) upgrade --install $(HELM_RELEASE) charts/webapp-operator --namespace $(HELM_NAMESPACE) $(HELM_ARGS)

.PHONY: helm-uninstall
helm-uninstall: tools ## Uninstall the chart (the CRD stays: helm.sh/resource-policy keep; `make uninstall` removes it).
	$(HELM) uninstall $(HELM_RELEASE) --namespace $(HELM_NAMESPACE) --ignore-not-found
