#!/usr/bin/env bash
# Puts the web page's third-party files from web/node_modules (npm ci, pinned by
# web/package-lock.json) into the package folder given as $1 (static/vendor), where
# `turnstream serve` serves them:
#   highlight/   highlight.js's ES-module core, the grammars the chat shows most, its licence;
#   codemirror/  the notebook's code editor (web/src/editor.js and CodeMirror 6, bundled by
#                esbuild into one ES module), with the licences of what it holds.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:?the destination folder}
src=web/node_modules/@highlightjs/cdn-assets
mkdir -p "$dest/highlight/languages" "$dest/codemirror"
cp "$src/es/core.min.js" "$dest/highlight/core.min.js"
cp "$src/LICENSE" "$dest/highlight/LICENSE"
for lang in python sql json bash shell javascript typescript yaml xml css markdown diff ini; do
  cp "$src/es/languages/$lang.min.js" "$dest/highlight/languages/$lang.min.js"
done
web/node_modules/.bin/esbuild web/src/editor.js --bundle --format=esm --minify --target=es2020 \
  --legal-comments=none --log-level=warning --outfile="$dest/codemirror/editor.min.js"
cp web/node_modules/@codemirror/view/LICENSE "$dest/codemirror/LICENSE"
