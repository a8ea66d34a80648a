#!/usr/bin/env bash
# `make test` the way a user runs it: in a fresh clone of HEAD, in a temporary directory with
# nothing beside it (no ../shared), TGKIT_SHARED_DIR pointed at a folder that does not exist.
# Fails when any test fails, when a needs-botapi-page test ran anyway (then the clone found a
# page it should not see: it is not standing on its own), and when another test skips because
# of what is beside the clone: each other skipped test is run once more with the checkout's
# ../shared linked beside the clone; one that then runs needed it, one that still skips
# skips for the machine or the build (no IPv6 on loopback, no comma locale, checks compiled
# out of a release build: tgtest_skip), which is not the clone's fault (its reason is shown).
# Only committed files are in the clone, as for a user; uncommitted changes are not tested.
#   scripts/clean-clone-test.sh [SHARED]     (SHARED: the folder to link, default ../shared)
set -euo pipefail
shared_arg=${1:-}
cd "$(dirname "$0")/.."
src=$(pwd)
real_shared=$(realpath -e "${shared_arg:-$src/../shared}" 2>/dev/null || true)
rev=$(git rev-parse HEAD)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tgkit-clean.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
copy="$tmp/tgkit"
nowhere="$tmp/no-shared-here"

[ -z "$(git status --porcelain --untracked-files=no)" ] ||
    echo "clean-clone-test: note: uncommitted changes are not in the clone (testing $rev)"
git clone -q --no-checkout "$src" "$copy"
git -C "$copy" cat-file -e "$rev^{commit}" 2>/dev/null || git -C "$copy" fetch -q origin "$rev"
git -C "$copy" checkout -q --detach "$rev"
[ ! -e "$tmp/shared" ] || { echo "clean-clone-test: $tmp/shared exists" >&2; exit 1; }
echo "clean-clone-test: $rev in $copy, TGKIT_SHARED_DIR=$nowhere"

log="$tmp/make-test.log"
status=0
(cd "$copy" && env -u BOTAPI_HTML -u TGKIT_SHARED_DIR \
    make --no-print-directory test CMAKE_ARGS="-DTGKIT_SHARED_DIR=$nowhere ${CMAKE_ARGS:-}") 2>&1 |
    tee "$log" || status=$?
if [ "$status" -ne 0 ]; then
    echo "clean-clone-test: make test failed in the clean clone (status $status)" >&2
    exit 1
fi

# ctest lists what did not run as "  38 - bot/name (Skipped)"; anything else there is a failure.
mapfile -t not_run < <(sed -n '/^The following tests did not run:/,/^[^[:space:]]/s/^[[:space:]]*[0-9]* - //p' "$log")
mapfile -t allowed < <(cd "$copy/build" && ctest -N -L '^needs-botapi-page$' |
    sed -n 's/^[[:space:]]*Test[[:space:]]*#[0-9]*: //p')
# Does test $1 still skip with ../shared beside the clone? Its reason goes to stdout.
skips_anyway() {
    [ -n "$real_shared" ] || return 1
    local out
    ln -sfn "$real_shared" "$tmp/shared"
    out=$(cd "$copy/build" &&
        ctest -R "^$(printf '%s' "$1" | sed 's/[][\.*^$+?(){}|]/\\&/g')\$" -V 2>&1) || true
    rm -f "$tmp/shared"
    printf '%s\n' "$out" | grep -m1 'SKIPPED: ' | sed 's/^[0-9]*: //'
    printf '%s\n' "$out" | grep -q '(Skipped)'
}
bad=0
machine=0
for t in "${not_run[@]}"; do
    name=${t% (*}
    why=${t##* (}
    if [ "$why" = "Skipped)" ] && printf '%s\n' "${allowed[@]}" | grep -qxF -- "$name"; then
        continue
    fi
    if [ "$why" = "Skipped)" ] && reason=$(skips_anyway "$name"); then
        echo "clean-clone-test: $name skips with ../shared beside the clone too: ${reason:-?}"
        machine=$((machine + 1))
        continue
    fi
    if [ "$why" = "Skipped)" ] && [ -z "$real_shared" ]; then
        echo "clean-clone-test: $name skipped; no ../shared beside $src to tell whether it" \
            "needs it" >&2
    elif [ "$why" = "Skipped)" ]; then
        echo "clean-clone-test: $name skips only without ../shared: it reads something" \
            "outside the tree" >&2
    else
        echo "clean-clone-test: $name did not run ($why" >&2
    fi
    bad=1
done
for a in "${allowed[@]}"; do
    if ! printf '%s\n' "${not_run[@]}" | grep -qxF -- "$a (Skipped)"; then
        echo "clean-clone-test: $a ran although the clone has no Bot API page: it found one" \
            "outside the clone" >&2
        bad=1
    fi
done
[ "${#allowed[@]}" -gt 0 ] || { echo "clean-clone-test: no needs-botapi-page test found" >&2; bad=1; }
[ "$bad" -eq 0 ] || exit 1
echo "clean-clone-test: passed; skipped only the ${#allowed[@]} tests that need the Bot API page" \
    "(and $machine that skip for the machine or the build)"
