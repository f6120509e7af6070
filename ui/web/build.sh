#!/usr/bin/env bash
# Copies the dashboard's browser libraries, as package-lock.json pins them,
# into ../static/vendor/, which is committed and embedded in the binary (so
# the Go build needs no npm). Run it after changing package.json;
# TestVendoredAssetsMatchTheLockfile fails if the committed files differ
# from what this script copies.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --loglevel=error
out=../static/vendor/uplot
mkdir -p "$out"
cp node_modules/uplot/dist/uPlot.iife.min.js node_modules/uplot/dist/uPlot.min.css node_modules/uplot/LICENSE "$out/"
