# Bindery developer entry points. `make run` and `make test` are the two commands a fresh machine
# needs; everything they depend on (the venv, the local control plane binaries) is set up here.

SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
BINDERY := $(VENV)/bin/bindery
# The local control plane is the development harness's own command (harness/, not part of the
# wheel): `python -m` finds it from the checkout's root, where make runs.
HARNESS := $(PY) -m harness cluster
STATE_DIR := .cache/cluster
RUN_NAMESPACE ?= default
# KUBELET=1: a real node (containerd, runc, a kubelet; needs root) instead of kwok's fake one,
# and sessions with the delivery sidecar (the project's image, built here without a registry).
KUBELET ?=
CLUSTER_FLAGS := $(if $(KUBELET),--kubelet,)
# On kwok's node no session process runs, so none can acknowledge: a handoff need not wait.
RUN_FLAGS := $(if $(KUBELET),--session-delivery-image localhost/bindery:dev,--unacknowledged-release-seconds 0)
# The controller's liveness endpoint and metrics port on this machine: change them to run a
# second checkout beside the first (`bindery run` exits 6 when one is taken).
LIVENESS_PORT ?= 8080
METRICS_PORT ?= 9090
# The image the examples' sessions run on the real node: the project's own, which the harness
# builds and the node has (the examples' busybox comes from a registry it may not reach).
NODE_IMAGE := localhost/bindery:dev
EXAMPLES := $(sort $(wildcard examples/manifests/*.yaml))
# What the banner says of the node the sessions run on.
KWOK_NOTE := Fake node (kwok): session pods read Running but no process runs, so handoffs are immediate and 'kubectl logs' has nothing to read; for real sessions: make run KUBELET=1
RUN_NOTE = $(if $(KUBELET),,$(KWOK_NOTE))
RUN_CONTROLLER = $(BINDERY) run --leader-elect --leader-election-namespace default \
  --liveness=http://127.0.0.1:$(LIVENESS_PORT)/healthz --metrics-port $(METRICS_PORT) $(RUN_FLAGS)
# The oldest Kubernetes release Bindery supports (harness/tools/k8s-<minor>; docs/install.md says
# why): `make test` runs the compatibility lane (tests marked `compat`) against it.
K8S_OLDEST = $(shell bash harness/tools/build.sh --versions | tail -n 1)

.PHONY: help venv control-plane control-plane-oldest run run-examples cluster cluster-down test unit lint fmt bench chaos e2e examples image helm-lint helm-crds argocd-values clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml session/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip
	$(PY) -m pip install --quiet --disable-pip-version-check -e ./session
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	touch $@

venv: $(VENV)/.installed ## create .venv with the session library, the controller and its dev tools

control-plane: ## build (once, cached in ~/.cache/bindery; harness/tools/build.sh) etcd, kube-apiserver, kubectl, kwok, helm of the newest Kubernetes
	bash harness/tools/build.sh >/dev/null

control-plane-oldest: control-plane ## the same for the oldest supported Kubernetes (the compatibility lane's)
	bash harness/tools/build.sh --k8s $(K8S_OLDEST) >/dev/null

cluster: venv control-plane ## start the local control plane in the background (KUBELET=1: a real node)
	@if [ -f $(STATE_DIR)/state.json ]; then echo "already running: $(STATE_DIR)/kubeconfig"; \
	else $(HARNESS) up $(CLUSTER_FLAGS) --state-dir $(STATE_DIR); fi

cluster-down: venv ## stop the local control plane
	$(HARNESS) down --state-dir $(STATE_DIR)

run: cluster ## local control plane + CRDs + examples, then the controller in the foreground (KUBELET=1: real sessions; LIVENESS_PORT, METRICS_PORT)
	@export KUBECONFIG=$(CURDIR)/$(STATE_DIR)/kubeconfig PATH="$$(bash harness/tools/build.sh --print):$$PATH"; \
	kubectl apply --server-side -f crds/ >/dev/null; \
	kubectl wait --for=condition=Established -f crds/ --timeout=60s >/dev/null; \
	kubectl apply --server-side -f examples/manifests/00-resourcetypes.yaml >/dev/null; \
	$(MAKE) -s --no-print-directory run-examples | kubectl apply --server-side -n $(RUN_NAMESPACE) -f - >/dev/null; \
	echo; echo "Bindery is starting against the local control plane. In another shell:"; \
	echo "  export KUBECONFIG=$(CURDIR)/$(STATE_DIR)/kubeconfig PATH=$$(bash harness/tools/build.sh --print):\$$PATH"; \
	echo "  kubectl get bindery -A"; \
	$(if $(RUN_NOTE),echo "$(RUN_NOTE)";) \
	echo "Stop with Ctrl-C; 'make cluster-down' stops the control plane."; \
	echo "Leader election is on (Lease default/bindery-controller): no second controller reconciles beside this one."; echo; \
	exec $(RUN_CONTROLLER)

run-examples: ## print the example manifests `make run` applies (KUBELET=1: sessions on the node's image)
	@for f in $(EXAMPLES); do echo "---"; \
	  if [ -n "$(KUBELET)" ]; then sed -e 's|^\(    image:\) .*|\1 $(NODE_IMAGE)|' "$$f"; else cat "$$f"; fi; \
	done

lint: venv ## ruff, mypy (strict) and the import contract that keeps the domain pure
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

fmt: venv ## format and fix what ruff can
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

unit: venv ## unit tests only (no control plane)
	$(PY) -m pytest -m "not integration and not e2e and not floors and not node" tests

# The oldest minor's control plane is built just before its lane (waiting for a build already
# under way, such as the one .ci/run starts in the background while the newest's suite runs).
test: venv control-plane lint ## everything: lint, unit, floors, integration (real API server) and node tests (real kubelet), then the compatibility lane on the oldest Kubernetes
	$(PY) -m pytest tests
	bash harness/tools/build.sh --k8s $(K8S_OLDEST) >/dev/null
	$(PY) -m pytest -m compat --k8s-version $(K8S_OLDEST) tests/integration tests/node

bench: venv control-plane ## benchmarks: prints figures and ratios to their targets
	$(PY) -m bench

CHAOS_ARGS ?=

chaos: venv control-plane ## chaos runs: churn, kill -9, API-server restarts; invariants replayed (minutes)
	$(PY) -m chaos $(CHAOS_ARGS)

IMAGE ?= bindery:dev

image: ## build the controller image (IMAGE=bindery:dev)
	docker build -t $(IMAGE) .

helm-lint: control-plane ## lint the Helm chart strictly: standalone, HA and namespaced
	@H="$$(bash harness/tools/build.sh --print)/helm"; \
	$$H lint --strict helm/bindery; \
	$$H lint --strict helm/bindery --set ha.enabled=true --set replicas=2; \
	$$H lint --strict helm/bindery --set-json 'watchNamespaces=["team-a"]' --set defaultResourceTypes.enabled=true

helm-crds: ## copy crds/ into the chart (a test keeps helm/bindery/crds identical)
	rm -f helm/bindery/crds/*.yaml
	cp crds/*.yaml helm/bindery/crds/

ARGOCD := helm/bindery/argocd

argocd-values: ## regenerate the Argo CD Helm values snippet from the shipped health.lua
	@{ echo "# Values for the Argo CD Helm chart (argo-cd): Bindery's health checks in argocd-cm."; \
	  echo "# Generated from health.lua by 'make argocd-values'; see docs/gitops.md."; \
	  echo "configs:"; echo "  cm:"; \
	  for kind in AgentSpec Tool Resource ResourceType ResourceGrant; do \
	    echo "    resource.customizations.health.bindery.dev_$$kind: |"; \
	    sed -e 's/^/      /' -e 's/^ *$$//' $(ARGOCD)/health.lua; \
	  done; } > $(ARGOCD)/argo-cd-values.yaml

e2e: venv ## kind end-to-end (needs Docker and kind; skips with the reason otherwise)
	$(PY) -m pytest -m e2e tests/e2e

examples: venv ## regenerate the rendered example manifests from their KDL and tool sources
	$(PY) -m controller.authoring.examples

clean: ## remove the venv and local state (the binary cache in ~/.cache/bindery stays)
	-$(HARNESS) down --state-dir $(STATE_DIR) 2>/dev/null
	rm -rf $(VENV) .cache .mypy_cache .ruff_cache .pytest_cache
