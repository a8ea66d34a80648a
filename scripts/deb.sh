#!/usr/bin/env bash
# `make deb`: Debian packages of tgkit into OUT (default build/deb): tgproxy, libtgbotSOVER,
# libtgbot-dev, tgbot-emulator, built by dpkg-buildpackage from a scratch copy of this tree
# with packaging/debian/ as its debian/ directory, then checked by lintian (errors and
# warnings fail). The version is the project's (include/tgbot/common.h, as CMakeLists.txt
# reads it); the library package's name follows the SONAME CMake gives it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-build/deb}")
jobs=${JOBS:-$(nproc)}
ver() { sed -n "s/^#define TG_VERSION_$1 \([0-9]*\).*/\1/p" include/tgbot/common.h; }
major=$(ver MAJOR) minor=$(ver MINOR) patch=$(ver PATCH)
[ -n "$major" ] && [ -n "$minor" ] && [ -n "$patch" ] ||
    { echo "deb: no TG_VERSION_MAJOR/MINOR/PATCH in include/tgbot/common.h" >&2; exit 1; }
version=$major.$minor.$patch
# CMakeLists.txt: SOVERSION 0.MINOR before 1.0, MAJOR after (docs/abi.md).
if [ "$major" = 0 ]; then sover=0.$minor; else sover=$major; fi

rm -rf "$out" && mkdir -p "$out"
src=$out/tgkit-$version
mkdir "$src"
# The tree as it is now (tracked and new files, not the build directories git ignores).
git ls-files -z --cached --others --exclude-standard |
    (while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done) |
    tar --null -T - -cf - | tar -xf - -C "$src"
cp -r packaging/debian "$src/debian"
sed "s/@SOVER@/$sover/g" packaging/debian/control.in > "$src/debian/control"
rm "$src/debian/control.in"
mv "$src/debian/libtgbot.install" "$src/debian/libtgbot$sover.install"
cp packaging/tgproxy.sysusers "$src/debian/tgproxy.sysusers"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
cat > "$src/debian/changelog" <<EOC
tgkit ($version) unstable; urgency=medium

  * Packaged from the tgkit tree at $commit (scripts/deb.sh).

 -- tgkit developers <tgkit@example.org>  $(date -R -d @"${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}")
EOC
(cd "$src" && dpkg-buildpackage -us -uc -b -j"$jobs")
changes=$(ls "$out"/tgkit_"$version"_*.changes)
echo "deb: lintian $changes"
lintian --fail-on error,warning --profile debian "$changes"
ls "$out"/*.deb
