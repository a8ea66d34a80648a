#!/usr/bin/env bash
# The ABI guard: libtgbot's exported symbols must match the committed list abi/libtgbot.symbols.
#   scripts/abi-symbols.sh check  <libtgbot.so> <list>   (ctest bot/abi_symbols, so CI)
#   scripts/abi-symbols.sh update <libtgbot.so> <list>   (make abi-update)
# The list is `nm -D --defined-only` of the shared library, names only, sorted, without the
# reserved names the toolchain adds (leading "__" or "_init"-style: sanitizers, crt).
set -euo pipefail
mode=${1:-}
lib=${2:-}
list=${3:-}
if [ -z "$mode" ] || [ -z "$lib" ] || [ -z "$list" ]; then
    echo "usage: $0 check|update <libtgbot.so> <symbols list>" >&2
    exit 2
fi
if [ ! -f "$lib" ]; then
    echo "abi-symbols: $lib: no such library (build the tgbot target first)" >&2
    exit 2
fi

exported() {
    nm -D --defined-only "$1" | awk 'NF >= 3 { print $3 }' | sed 's/@.*//' |
        grep -Ev '^(__|_init$|_fini$|_edata$|_end$)' | LC_ALL=C sort -u
}

case "$mode" in
update)
    {
        echo "# libtgbot's exported symbols: checked by ctest bot/abi_symbols (docs/abi.md)."
        echo "# Regenerate with 'make abi-update' after adding symbols on purpose; never remove one"
        echo "# without the SOVERSION bump docs/abi.md describes."
        exported "$lib"
    } >"$list"
    echo "abi-symbols: wrote $(grep -vc '^#' "$list") symbols to $list"
    ;;
check)
    now=$(mktemp)
    want=$(mktemp)
    trap 'rm -f "$now" "$want"' EXIT
    exported "$lib" >"$now"
    grep -v '^#' "$list" | LC_ALL=C sort -u >"$want"
    added=$(LC_ALL=C comm -13 "$want" "$now")
    removed=$(LC_ALL=C comm -23 "$want" "$now")
    if [ -z "$added" ] && [ -z "$removed" ]; then
        echo "abi-symbols: $(wc -l <"$now") exported symbols match $list"
        exit 0
    fi
    if [ -n "$removed" ]; then
        echo "abi-symbols: symbols REMOVED from libtgbot (this breaks every program linked"
        echo "against it; see docs/abi.md before doing it on purpose):"
        echo "$removed" | sed 's/^/  - /'
    fi
    if [ -n "$added" ]; then
        echo "abi-symbols: new exported symbols not in $list:"
        echo "$added" | sed 's/^/  + /'
    fi
    echo "If this change is intended, run 'make abi-update' and commit abi/libtgbot.symbols"
    echo "with your change (review the diff: additions are fine, removals need docs/abi.md)."
    exit 1
    ;;
*)
    echo "abi-symbols: unknown mode '$mode' (check or update)" >&2
    exit 2
    ;;
esac
