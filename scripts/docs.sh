#!/usr/bin/env bash
# make docs: libtgbot's API reference from the public headers with Doxygen (docs/Doxyfile).
# Writes <build>/docs/html/index.html; Doxygen's warnings go to <build>/docs/warnings.log.
# Fails when Doxygen fails or when the generated API lost its Bot API links.
set -euo pipefail
build=${1:-build}
cd "$(dirname "$0")/.."
out="$(realpath -m "$build")/docs"
rm -rf "$out"
mkdir -p "$out"
version=$(sed -n 's/^#define TG_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' \
    include/tgbot/common.h | paste -sd.)
TGKIT_DOCS_OUT="$out" TGKIT_VERSION="$version" doxygen docs/Doxyfile
html="$out/html"
test -f "$html/index.html" || { echo "docs: doxygen wrote no index.html"; exit 1; }
# The generated API must link to the Bot API page: sendMessage's function and Message's type.
grep -rlq 'href="https://core.telegram.org/bots/api#sendmessage"' "$html" ||
    { echo "docs: no link to the Bot API page for sendMessage"; exit 1; }
grep -rlq 'href="https://core.telegram.org/bots/api#message"' "$html" ||
    { echo "docs: no link to the Bot API page for Message"; exit 1; }
links=$(grep -rho 'href="https://core.telegram.org/bots/api#[a-z0-9-]*"' "$html" | sort -u | wc -l)
warnings=$(grep -c . "$out/warnings.log" || true)
echo "docs: $html/index.html ($links Bot API pages linked, $warnings doxygen warnings in" \
     "$out/warnings.log)"
