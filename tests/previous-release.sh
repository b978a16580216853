#!/usr/bin/env bash
# Builds the botbox of the previous release (the commit named in tests/previous-release) once,
# for the rolling-upgrade test, and prints the binary's path. The build has a target folder
# of its own (target/previous-release), so it never touches this build's artifacts; a cold
# build takes about as long as the first build of this tree.
set -euo pipefail
cd "$(dirname "$0")/.."
want=$(tr -d '[:space:]' < tests/previous-release)
# A shallow clone may lack the commit: fetch the history first.
if ! git cat-file -e "$want^{commit}" 2>/dev/null && [ "$(git rev-parse --is-shallow-repository)" = true ]; then
    git fetch --quiet --unshallow >&2
fi
commit=$(git rev-parse --short=12 "$want^{commit}")
root="${CARGO_TARGET_DIR:-$PWD/target}/previous-release"
bin="$root/bin/$commit/botbox"
if [ ! -x "$bin" ]; then
    src="$root/src/$commit"
    rm -rf "$src"
    mkdir -p "$src" "$root/bin/$commit"
    git archive "$commit" | tar -x -C "$src"
    (cd "$src" && CARGO_TARGET_DIR="$root/target" cargo build -p botbox >&2)
    cp "$root/target/debug/botbox" "$bin.tmp"
    mv "$bin.tmp" "$bin"
fi
echo "$bin"
