#!/usr/bin/env bash
# Release tooling (see RELEASING.md), built from its own module so that the
# root module gains no requirement and a broken workspace cannot stop it.
#   scripts/release.sh check [-rev REV] [-version V]  # install every module as a user would, from the commit
#   scripts/release.sh set-version vX.Y.Z             # every requirement between our modules, and go.work
#   scripts/release.sh tidy [-check] [DIR...]         # go mod tidy as outside the workspace, where it cannot run yet
#   scripts/release.sh tags [-rev REV]                # the git tag commands for the release
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,7p' "$0" >&2; exit 2; }
cmd=$1; shift
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
(cd "$repo/scripts/tools" && GOWORK=off go build -o "$bin/release" ./release)
"$bin/release" "$cmd" -repo "$repo" "$@"
