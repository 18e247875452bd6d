#!/usr/bin/env bash
# test_layers.sh — the layering check (check_layers.sh) passes on the tree,
# and fails, naming the file, on a copy with one upward include planted in it,
# so that a check that can no longer fail is caught too. Then every public
# header compiles on its own.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)
pass=0 fail=0
ok()  { echo "ok    $1"; pass=$((pass + 1)); }
bad() { echo "FAIL  $1"; echo "$2" | sed 's/^/      /'; fail=$((fail + 1)); }

out=$(bash "$here/check_layers.sh" "$root" 2>&1) && ok "the tree: every include looks down" \
    || bad "the tree: every include looks down" "$out"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/meshtrain-layers.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# plant FILE LINE WANT NAME: a fresh copy, LINE added on top of FILE; the
# check must exit 1 with WANT in its output.
plant() {
    local file=$1 line=$2 want=$3 name=$4
    rm -rf "$tmp/src" "$tmp/include"
    cp -r "$root/src" "$root/include" "$tmp/"
    sed -i "1i $line" "$tmp/$file"
    out=$(bash "$here/check_layers.sh" "$tmp" 2>&1)
    if [ $? -eq 1 ] && grep -qF "$want" <<<"$out"; then ok "$name"
    else bad "$name" "$out"; fi
}
plant src/ops/matmul.c '#include "graph/graph_impl.h"' "src/ops/matmul.c (ops) includes \"graph/graph_impl.h\"" \
      "an op including graph/ is refused"
plant src/ops/op_table.c '#include "backend/backend_impl.h"' "src/ops/op_table.c (ops) includes \"backend/backend_impl.h\"" \
      "an op table including the backend is refused (kernels sit below it)"
plant src/comm/ctx.c '#include "backend/backend_impl.h"' "src/comm/ctx.c (comm) includes \"backend/backend_impl.h\"" \
      "comm including the backend is refused (a backend hands its stream down)"
plant src/base/status.c '#include "meshtrain/comm.h"' "src/base/status.c (base)" \
      "base including a public header of a higher layer is refused"
plant src/graph/ir.c '#include "meshtrain.h"' "includes the umbrella" \
      "a layer including the umbrella header is refused"
plant include/meshtrain/mesh.h '#include "meshtrain/graph.h"' "include/meshtrain/mesh.h (mesh)" \
      "a public header including a higher one is refused"
rm -rf "$tmp/src" "$tmp/include"
cp -r "$root/src" "$root/include" "$tmp/"
mkdir -p "$tmp/src/newlayer" && touch "$tmp/src/newlayer/x.c"
out=$(bash "$here/check_layers.sh" "$tmp" 2>&1)
if [ $? -eq 1 ] && grep -q "src/newlayer/ is not a layer" <<<"$out"; then ok "an unlisted folder is refused"
else bad "an unlisted folder is refused" "$out"; fi

# Every public header compiles on its own (it includes what it uses), as C11
# with the project's warnings, and as C++ where a C++ compiler is installed.
for h in "$root"/include/meshtrain/*.h "$root/include/meshtrain.h"; do
    name=${h#"$root/include/"}
    out=$(printf '#include "%s"\nint main(void) { return 0; }\n' "$name" |
          ${CC:-cc} -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$root/include" -x c - 2>&1) &&
        ok "$name compiles alone" || bad "$name compiles alone" "$out"
    if command -v c++ >/dev/null 2>&1; then
        out=$(printf '#include "%s"\nint main() { return 0; }\n' "$name" |
              c++ -Wall -Wextra -Werror -fsyntax-only -I"$root/include" -x c++ - 2>&1) &&
            ok "$name compiles alone as C++" || bad "$name compiles alone as C++" "$out"
    fi
done

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
