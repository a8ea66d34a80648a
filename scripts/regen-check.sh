#!/usr/bin/env bash
# Fail when the committed generated code differs from a fresh generation.
set -euo pipefail
make --no-print-directory regen >/dev/null
if ! git diff --quiet -- src/bot/api include/tgbot; then
    echo "regen-check: generated code is stale; run 'make regen' and commit:" >&2
    git diff --stat -- src/bot/api include/tgbot >&2
    exit 1
fi
echo "regen-check: generated code is up to date"
