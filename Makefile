# anvil — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help
export BROWSERSLIST_IGNORE_OLD_DATA := 1
GO ?= go
PKGS := ./...
E2E_DRIVER := $(CURDIR)/.e2e/driver

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z0-9_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F ':.*?## ' '{printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}'

node_modules: package.json package-lock.json
	npm ci --no-audit --no-fund
	@touch node_modules

.PHONY: run
run: ## run the cockpit on an embedded default (own Postgres, key and demo login); prints URL and login; Ctrl-C stops it
	@test -x bin/anvil || echo "make run: the first build of bin/anvil downloads and compiles every module (a minute or two); each package is named as it is built"
	$(GO) build -v -o bin/anvil .
	bin/anvil dev
# Not `go run`: it answers an interrupt with exit status 1 even when the
# program it runs stopped cleanly, which make reports as an error. The binary
# shuts down gracefully on SIGINT/SIGTERM and exits 0, so Ctrl-C leaves no
# "make: *** … Error" line.

.PHONY: clean-demo
clean-demo: ## reset the demo of `make run`: drop its database, then remove .anvil (key, login and its runs' caches)
	$(GO) build -o bin/anvil .
	bin/anvil dev --reset

.PHONY: build
build: ## build ./bin/anvil
	$(GO) build -o bin/anvil .

.PHONY: generate
generate: node_modules ## regenerate templ code, the CSS and the vendored htmx files
	$(GO) tool templ generate
	npm run -s vendor
	npm run -s css

.PHONY: verify
verify: generate ## fail when generated code or CSS differ from what is committed
	@git diff --exit-code -- views static || (echo "generated files are stale: run 'make generate' and commit" >&2; exit 1)
	@test -z "$$(git status --porcelain -- views static)" || (git status --porcelain -- views static; echo "untracked generated files" >&2; exit 1)

GOLANGCI_LINT := github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

.PHONY: lint
lint: ## gofmt, vet, go mod tidy, golangci-lint (.golangci.yml: import directions, errcheck, errorlint, staticcheck, revive, unparam)
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$'))" || (gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$'); echo "gofmt needed" >&2; exit 1)
	@$(GO) mod tidy -diff || (echo "go.mod/go.sum are not tidy: run 'go mod tidy' and commit" >&2; exit 1)
	$(GO) vet $(PKGS)
	$(GO) vet -tags e2e ./e2e/...
	$(GO) run $(GOLANGCI_LINT) run ./...

.e2e/driver: node_modules
	mkdir -p .e2e/driver
	ln -sfn ../../node_modules/playwright-core .e2e/driver/package
	ln -sfn "$$(command -v node)" .e2e/driver/node

.PHONY: test
test: test-race test-e2e ## run every test: the Go tests under the race detector (test-race), then the browser tests (test-e2e); needs Postgres, Chromium, bubblewrap

.PHONY: test-race
test-race: ## run the Go tests under the race detector (no browser tests; make test includes it)
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

.PHONY: test-unit
test-unit: ## run the Go tests without the browser or the race detector (the quick loop)
	$(GO) test -count=1 $(PKGS)

.PHONY: test-e2e
test-e2e: node_modules .e2e/driver ## run the browser tests only
	PLAYWRIGHT_DRIVER_PATH=$(E2E_DRIVER) $(GO) test -count=1 -tags e2e -timeout 10m -v ./e2e/...

.PHONY: screenshots
screenshots: node_modules .e2e/driver ## write the README's screenshots to docs/screenshots (the browser test TestEveryScreenFits)
	ANVIL_SCREENSHOTS=docs/screenshots PLAYWRIGHT_DRIVER_PATH=$(E2E_DRIVER) $(GO) test -count=1 -tags e2e -timeout 10m -run 'TestEveryScreenFits$$' ./e2e/

.PHONY: bench
bench: ## print the performance figures each issue names (ONLY=runs/images: one section or group, see go run ./e2e/bench -list)
	$(GO) run ./e2e/bench $(if $(ONLY),-only $(ONLY))

.PHONY: package
package: ## build dist/anvil_<version>-1_<arch>.deb and .oci.tar from this commit, reproducibly (internal/packaging)
	$(GO) run ./internal/packaging/cmd/mkpkg -out dist

.PHONY: package-root
package-root: ## make the fresh Debian roots the package tests install into and boot (mmdebstrap; cached a week in ~/.cache/anvil)
	$(GO) run ./internal/packaging/cmd/mkpkg -debian-root

.PHONY: test-package
test-package: ## install the .deb into fresh Debian roots, run both units under a real systemd, lint and unpack the image (root; mmdebstrap, systemd-nspawn, systemd-analyze, lintian, umoci, skopeo)
	$(GO) test -count=1 -tags package -timeout 20m -v ./internal/packaging/
