#!/usr/bin/env bash
# The browser test's set-up: Debian's chromium (when missing) and the npm packages.
set -euo pipefail
cd "$(dirname "$0")"
if ! command -v chromium >/dev/null; then
    # A fresh machine's package lists may be missing or stale.
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium
fi
npm ci --no-audit --no-fund
