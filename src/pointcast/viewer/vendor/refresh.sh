#!/usr/bin/env bash
# Refresh the viewer's vendored libraries from the npm registry (needs npm; pointcast itself
# does not). Each package is fetched with `npm pack` at the version pinned below; only the
# minified browser build (or the data file) and the licence are kept, in a folder named after
# the package, with its version in VERSIONS. To upgrade, change a version here and run it.
set -euo pipefail
cd "$(dirname "$0")"

# package@version and the files kept from it (paths inside the package)
PACKAGES=(
  "uplot@1.6.32 dist/uPlot.iife.min.js dist/uPlot.min.css"
  "d3-array@3.2.5 dist/d3-array.min.js"
  "d3-geo@3.1.2 dist/d3-geo.min.js"
  "topojson-client@3.1.0 dist/topojson-client.min.js"
  "world-atlas@2.0.2 countries-110m.json"
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
: > VERSIONS.new
for entry in "${PACKAGES[@]}"; do
  read -r spec files <<<"$entry"
  name=${spec%@*}
  tarball=$(cd "$work" && npm pack --silent "$spec")
  mkdir -p "$work/$name"
  tar -xzf "$work/$tarball" -C "$work/$name"
  rm -rf "$name"
  mkdir -p "$name"
  for f in $files LICENSE; do
    cp "$work/$name/package/$f" "$name/$(basename "$f")"
  done
  license=$(node -p "require('$work/$name/package/package.json').license")
  echo "$spec $license" >> VERSIONS.new
done
mv VERSIONS.new VERSIONS
echo "vendored:"; cat VERSIONS
