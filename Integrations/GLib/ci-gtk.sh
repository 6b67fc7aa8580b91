#!/usr/bin/env bash
# GTKCounter under Xvfb, clicked by xdotool like a user: the label must change. Leaves a
# screenshot of the window after the click in $1 (default: gtkcounter.png). Run from this folder
# after `swift build`.
set -euo pipefail
shot=${1:-gtkcounter.png}
export GSK_RENDERER=cairo   # no GL under Xvfb
export NO_AT_BRIDGE=1       # no accessibility bus in CI
display=:$((90 + RANDOM % 100))
Xvfb "$display" -screen 0 640x480x24 -nolisten tcp >/dev/null 2>&1 &
xvfb=$!
trap 'kill $xvfb 2>/dev/null || true' EXIT
export DISPLAY=$display
for _ in $(seq 50); do xdotool getdisplaygeometry >/dev/null 2>&1 && break; sleep 0.1; done
log=$(mktemp)
GTKCOUNTER_LINGER_MS=1500 timeout 60 .build/debug/GTKCounter --wait-for-click >"$log" 2>&1 &
app=$!
window=$(timeout 30 xdotool search --sync --onlyvisible --name GTKCounter | head -1)
sleep 0.5  # the first frame
xdotool mousemove --window "$window" 160 120 click 1
for _ in $(seq 50); do grep -q "label: Clicked 1 time" "$log" && break; sleep 0.1; done
timeout 10 import -window root "$shot" || echo "(no screenshot: ImageMagick's import failed)"
status=0
wait $app || status=$?
cat "$log" | grep -v "Gtk-WARNING" || true
if [ $status -ne 0 ] || ! grep -q "self-test passed" "$log"; then
    echo "error: GTKCounter did not see the click through (status $status)" >&2
    exit 1
fi
echo "GTKCounter: clicked with xdotool, the label changed; screenshot in $shot"
