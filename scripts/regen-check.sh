#!/usr/bin/env bash
# Fail when the committed generated code differs from a fresh generation.
set -euo pipefail
# Only the generator's own output is compared (others' uncommitted headers are not its business).
gen=(src/bot/api include/tgbot/api.h)
make --no-print-directory regen >/dev/null
if [ -n "$(git status --porcelain -- "${gen[@]}")" ]; then
    echo "regen-check: generated code is stale; run 'make regen' and commit:" >&2
    git status --short -- "${gen[@]}" >&2
    exit 1
fi
echo "regen-check: generated code is up to date"
