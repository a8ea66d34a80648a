#!/bin/sh
# need-files.sh FILE... -- COMMAND [ARG...]
# Runs COMMAND when every FILE is readable; otherwise says which one is missing and why that
# is not a failure, and exits 77, which ctest reports as "skipped" (SKIP_RETURN_CODE 77).
# For tests whose input may legitimately be absent: Telegram's Bot API page is not ours to
# ship, so a plain clone has no copy (CMake's TGKIT_SHARED_DIR says where botapi/ is).
missing=
while [ $# -gt 0 ] && [ "$1" != "--" ]; do
    [ -r "$1" ] || missing="$missing $1"
    shift
done
if [ "$1" != "--" ] || [ $# -lt 2 ]; then
    echo "need-files.sh: usage: need-files.sh FILE... -- COMMAND [ARG...]" >&2
    exit 2
fi
shift
if [ -n "$missing" ]; then
    echo "SKIPPED: missing${missing}"
    echo "  (Telegram's Bot API page and its counter are not part of the tree; configure with"
    echo "   -DTGKIT_SHARED_DIR=DIR where DIR/botapi/ holds them to run this test)"
    exit 77
fi
exec "$@"
