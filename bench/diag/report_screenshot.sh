# A screenshot of an `agent report` page with headless Chromium (Debian's `chromium`; the flags that work in a
# sandbox with no network): bash bench/diag/report_screenshot.sh REPORT.html OUT.png [HEIGHT]
set -eu
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking \
  --disable-component-update --disable-sync --hide-scrollbars --virtual-time-budget=8000 \
  --user-data-dir="$(mktemp -d)" --window-size=1280,${3:-3300} --screenshot="$2" "file://$(realpath "$1")" 2>/dev/null
ls -la "$2"
