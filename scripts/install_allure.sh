#!/usr/bin/env bash
# Installs the Allure 2 command line (npm allure-commandline, needs Node + Java)
# into <repo>/.tools/allure, where harness.reporting.report finds it. Idempotent:
# does nothing when the pinned version is already there.
#
#   bash scripts/install_allure.sh
#
# Allure 2 rather than 3: it honours categories.json and builds a single-file
# report from the command line (Allure 3 needs a config file for that).
set -euo pipefail
ALLURE_VERSION=2.46.1
cd "$(dirname "$0")/.."
prefix=.tools/allure
cli="$prefix/node_modules/.bin/allure"
export ALLURE_NO_ANALYTICS=true

for tool in npm java; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "install_allure: '$tool' not found; Allure $ALLURE_VERSION needs Node (npm) and Java" >&2
    exit 2
  fi
done

if [ -x "$cli" ] && [ "$("$cli" --version 2>/dev/null)" = "$ALLURE_VERSION" ]; then
  echo "allure $ALLURE_VERSION already installed at $cli"
  exit 0
fi

mkdir -p "$prefix"
npm install --prefix "$prefix" --no-audit --no-fund --loglevel=error --save-exact \
  "allure-commandline@$ALLURE_VERSION" >/dev/null
echo "allure $("$cli" --version) installed at $cli"
