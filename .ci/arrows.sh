#!/usr/bin/env bash
# Fails on a wrong-way import: domain must not import web, views, jobs, echo
# or templ; views must not import db or domain services; db imports none of
# anvil's higher layers. (The same rules as depguard would express, checked
# with `go list` so CI needs no extra tool.)
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0
check() { # package-pattern forbidden-regex
  local pkgs
  pkgs=$(go list "$1" 2>/dev/null)
  for p in $pkgs; do
    bad=$(go list -f '{{join .Imports "\n"}}' "$p" | grep -E "$2" || true)
    if [ -n "$bad" ]; then
      echo "wrong-way import in $p:" $bad >&2
      fail=1
    fi
  done
}
check ./domain/...  '^anvil/(web|views|jobs)(/|$)|^github.com/labstack/echo|^github.com/a-h/templ'
check ./views/...   '^anvil/(db|domain|jobs|web)(/|$)|^github.com/uptrace/bun|^github.com/jackc/pgx'
check ./db/...      '^anvil/(domain|web|views|jobs)(/|$)'
check ./jobs/...    '^anvil/(web|views)(/|$)|^github.com/labstack/echo'
exit $fail
