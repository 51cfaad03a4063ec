#!/usr/bin/env bash
# Copies the web page's third-party files from web/node_modules (npm ci, pinned by
# web/package-lock.json) into the package folder given as $1, where `turnstream serve`
# serves them: highlight.js's ES-module core, the grammars the chat shows most, its licence.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:?the destination folder}
src=web/node_modules/@highlightjs/cdn-assets
mkdir -p "$dest/languages"
cp "$src/es/core.min.js" "$dest/core.min.js"
cp "$src/LICENSE" "$dest/LICENSE"
for lang in python sql json bash shell javascript typescript yaml xml css markdown diff ini; do
  cp "$src/es/languages/$lang.min.js" "$dest/languages/$lang.min.js"
done
