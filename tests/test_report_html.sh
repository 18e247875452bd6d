#!/usr/bin/env bash
# test_report_html.sh — `meshtrain report TRACE --html FILE` (issue 43 item 4):
# one self-contained page of a real 2-device run's report.
#   - The page holds no script, no style sheet, image or font from
#     elsewhere (no src=, href=, <link>, <script>, url(); the one http:
#     address is SVG's namespace), and its three pictures inline.
#   - Its text holds the report's figures, read from `report --json` of the
#     same trace (not from the page's writer): each op kind with its count,
#     each device's busy ms, each step's MFU, each fix's sentence, the
#     run's first and last loss.
#   - In headless Chromium (Debian's chromium, installed with apt-get when
#     missing and root; else "skip" with the reason): the page loads with
#     no console message, its DOM holds the roofline's <svg> with a circle
#     an op kind, and a screenshot shows the roofline: pixels of its
#     compute-bound blue and its memory-bound orange (the PNG decoded here
#     with zlib).
#   - --html beside an input of the same name is refused.
#
#   bash tests/test_report_html.sh <meshtrain binary> [<build dir>]
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
test_start test_report_html.sh "$@"

for i in $(seq 60); do printf 'the quick brown fox jumps over the lazy dog; one run on any mesh. '; done >text.txt
"$BIN" train --data text.txt --layers 2 --channels 64 --heads 4 --seq 32 --max-seq 32 --batch 4 \
    --steps 4 --devices 2 --mesh data=2 --threads 1 --seed 7 --quiet --trace tr.json \
    --metrics m.jsonl --eval-every 2 >train.txt 2>&1 || bad "train --trace" "$(tail -3 train.txt)"
FIG=(--peak-gflops 100 --bandwidth-gbs 20)
"$BIN" report tr.json "${FIG[@]}" --metrics m.jsonl --json >rep.json 2>err.txt ||
    bad "report --json" "$(cat err.txt)"
if "$BIN" report tr.json "${FIG[@]}" --metrics m.jsonl --html page.html >out.txt 2>err.txt &&
   grep -q "^page: page.html$" out.txt && [ -s page.html ]; then
    ok "report --html writes the page and says so"
else
    bad "report --html" "$(cat err.txt)"
fi

# self-contained: nothing from elsewhere, the pictures inline
if ! grep -Eiq '<script|<link|<img|<iframe|src=|href=|url\(|@import' page.html &&
   [ "$(grep -o 'http[s]*://[^"]*' page.html | sort -u)" = "http://www.w3.org/2000/svg" ] &&
   [ "$(grep -c '<svg' page.html)" = 3 ]; then
    ok "the page loads nothing from elsewhere; its 3 pictures are inline SVG"
else
    bad "self-contained page" "$(grep -Eio '<script|<link|<img|src=|href=|url\(' page.html | head -3)"
fi

# the report's figures, from --json, in the page's text
if python3 - rep.json m.jsonl page.html <<'PY'
import html, json, re, sys
rep = json.load(open(sys.argv[1]))
page = open(sys.argv[3], encoding="utf-8").read()
text = html.unescape(re.sub(r"<[^>]+>", " ", page))   # the page's text, tags gone
cells = [html.unescape(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", page)]
missing = []
def need(what, ok):
    if not ok: missing.append(what)
for o in rep["ops"]:
    i = [k for k in range(len(cells) - 1) if cells[k] == o["kind"] and cells[k + 1] == str(o["count"])]
    need("op %s x%d" % (o["kind"], o["count"]), i)
for d in rep["devices"]:
    need("device %d busy" % d["device"], "%.3f" % (d["busy_us"] * 1e-3) in cells)
for s in rep["steps"]:
    need("step %d MFU" % s["step"], s["mfu"] is None or "%.1f" % (s["mfu"] * 100) in cells)
for fx in rep["fixes"]:
    need("fix " + fx["text"][:30], fx["text"] in text)
first = json.loads(open(sys.argv[2]).readline())["loss"]
need("first loss", "%.4f" % first in cells)
need("op count", len(rep["ops"]) > 3)
if missing:
    print("missing from the page:", "; ".join(missing[:5]))
    sys.exit(1)
PY
then ok "the page's tables and text hold report --json's figures"
else bad "the page's figures" "see above"; fi

expect_fail "--html onto the trace" 2 "html" \
    "$BIN" report tr.json --html tr.json

# ---- in Chromium -------------------------------------------------------------
CHROME=$(command -v chromium || true)
if [ -z "$CHROME" ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get -o DPkg::Lock::Timeout=300 install -y --no-install-recommends \
        chromium >apt.log 2>&1 || true
    CHROME=$(command -v chromium || true)
fi
if [ -z "$CHROME" ]; then
    echo "skip: chromium is missing and could not be installed (apt-get install chromium, as root)"
    test_end
    exit $?
fi
CH=(timeout 120 "$CHROME" --headless=new --no-sandbox --disable-gpu --hide-scrollbars
    --no-first-run --user-data-dir="$PWD/chrome-profile" --enable-logging=stderr --v=0)
"${CH[@]}" --window-size=1280,850 --force-device-scale-factor=0.5 --screenshot="$PWD/shot.png" "file://$PWD/page.html" \
    >chrome.txt 2>&1 || bad "chromium --screenshot" "$(tail -3 chrome.txt)"
"${CH[@]}" --dump-dom "file://$PWD/page.html" >dom.html 2>chrome_dom.txt ||
    bad "chromium --dump-dom" "$(tail -3 chrome_dom.txt)"
if grep -Eq 'CONSOLE|Uncaught|console\.(error|warn)' chrome.txt chrome_dom.txt; then
    bad "no console message" "$(grep -Eh 'CONSOLE|Uncaught' chrome.txt chrome_dom.txt | head -3)"
else ok "the page loads in Chromium with no console message"; fi
n_ops=$(python3 -c 'import json,sys; print(sum(1 for o in json.load(open("rep.json"))["ops"] if o["flops"] and o["bytes"] and o["bound"] != "comm"))')
n_circles=$(python3 - dom.html <<'PY'
import re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
m = re.search(r'<figure id="roofline">(.*?)</figure>', dom, re.S)
print(len(re.findall(r"<circle[^>]*><title>", m.group(1))) if m else -1)
PY
)
[ "$n_circles" = "$n_ops" ] && ok "Chromium's DOM: the roofline's svg, a circle for each of $n_ops op kinds" ||
    bad "the roofline in the DOM" "$n_circles circles, $n_ops op kinds with flops and bytes"
if python3 - shot.png <<'PY'
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, w = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    body = data[pos + 8:pos + 8 + n]
    if kind == b"IHDR":
        w, h, depth, ctype = struct.unpack(">IIBB", body[:10])
        assert depth == 8 and ctype in (2, 6), "8-bit RGB(A) expected"
        bpp = 3 if ctype == 2 else 4
    elif kind == b"IDAT":
        idat += body
    pos += 12 + n
raw, stride = zlib.decompress(idat), w * bpp
prev, rows, i = bytearray(stride), [], 0
for y in range(h):                       # PNG's five row filters
    f, line = raw[i], bytearray(raw[i + 1:i + 1 + stride])
    i += 1 + stride
    for x in range(stride):
        a = line[x - bpp] if x >= bpp else 0
        b, c = prev[x], prev[x - bpp] if x >= bpp else 0
        if f == 1: line[x] = (line[x] + a) & 255
        elif f == 2: line[x] = (line[x] + b) & 255
        elif f == 3: line[x] = (line[x] + (a + b) // 2) & 255
        elif f == 4:
            p = a + b - c
            pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
            line[x] = (line[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
    rows.append(line)
    prev = line
def near(px, rgb, tol):   # the circles' fills at opacity 0.6 over white, or a legend's
    return all(abs(px[k] - rgb[k]) <= tol for k in range(3))
blue = [0x4e, 0x79, 0xa7]; orange = [0xf2, 0x8e, 0x2b]
def over_white(c): return [round(0.6 * v + 0.4 * 255) for v in c]
counts = {"blue": 0, "orange": 0}
for line in rows:
    for x in range(0, len(line), bpp):
        px = line[x:x + 3]
        if near(px, over_white(blue), 24) or near(px, blue, 24): counts["blue"] += 1
        if near(px, over_white(orange), 24) or near(px, orange, 24): counts["orange"] += 1
print("roofline pixels: %d blue, %d orange" % (counts["blue"], counts["orange"]))
sys.exit(0 if counts["blue"] > 40 and counts["orange"] > 40 else 1)
PY
then ok "the screenshot shows the roofline (compute-bound blue and memory-bound orange)"
else bad "the screenshot's roofline" "too few of its colours"; fi

test_end
