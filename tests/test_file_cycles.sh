#!/usr/bin/env bash
# test_file_cycles.sh — within a folder of src/, no circle of files calls
# each other: file A calls a function that file B defines is an edge A -> B,
# read from the object files' symbol tables (nm), and the edges of each
# folder named below must form no cycle. check_layers.sh holds the order
# between folders; this holds it inside them, so a folder reads bottom up
# (graph/: errors, names, ir; the builders; the rules; the transforms; the
# plan; exec; program.c, the compile driver, on top).
#
#   bash tests/test_file_cycles.sh MESHTRAIN BUILD_DIR   (ctest passes both)
#
# Prints each cycle's files and the calls that close it; exits 1 if any.
set -euo pipefail
build=${2:?usage: test_file_cycles.sh MESHTRAIN BUILD_DIR}
objs=$build/CMakeFiles/mt_objects.dir/src
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# The folders held acyclic: every folder of src/ but the program's (cli).
FOLDERS=(base vec mesh tensor profile comm ops backend graph partition optim pipeline models io train plan examples)

bad=0 checked=0
for folder in "${FOLDERS[@]}"; do
    dir=$objs/$folder
    files=()
    # the folder's files and those of its subfolders (models/gpt/gpt.c), one
    # graph; an object whose source was removed is stale
    while IFS= read -r -d '' o; do
        rel=${o#"$dir"/}
        [[ -f $root/src/$folder/${rel%.o} ]] && files+=("$o")
    done < <(find "$dir" -name '*.o' -print0 2>/dev/null | sort -z)
    if ((${#files[@]} == 0)); then
        echo "file_cycles: no object files in $dir; build first" >&2
        exit 1
    fi
    checked=$((checked + ${#files[@]}))
    # "file kind symbol" per defined (T/D/B/R) or undefined (U) symbol
    # one nm for the folder (-A: each line "path:value type name"); a
    # process per file made this test 10 s
    # (a file is named by its path under the folder: gpt/gpt for gpt/gpt.c)
    nm -A "${files[@]}" | awk -v dir="$dir" '{ split($1, p, ":"); f = substr(p[1], length(dir) + 2); sub(/\.c\.o$/, "", f)
                                 if ($2 == "U") print f, "U", $3
                                 else if (NF == 3 && $2 ~ /^[TDBR]$/) print f, "D", $3 }' |
        awk -v folder="$folder" '
        $2 == "D" { def[$3] = $1; files[$1] = 1 }
        $2 == "U" { n_use++; use_f[n_use] = $1; use_s[n_use] = $3 }
        END {
            for (i = 1; i <= n_use; i++) {
                to = def[use_s[i]]
                if (to == "" || to == use_f[i]) continue
                key = use_f[i] SUBSEP to
                if (!(key in edge)) { edge[key] = use_s[i]; out[use_f[i]]++ }
            }
            # peel files that call no remaining file; what is left is in or
            # above a cycle
            for (changed = 1; changed;) {
                changed = 0
                for (f in files) {
                    if (f in gone) continue
                    live = 0
                    for (key in edge) {
                        split(key, ft, SUBSEP)
                        if (ft[1] == f && !(ft[2] in gone)) live = 1
                    }
                    if (!live) { gone[f] = 1; changed = 1 }
                }
            }
            n = 0
            for (f in files) if (!(f in gone)) left[++n] = f
            if (n == 0) exit 0
            printf "file_cycles: src/%s/ has a circle of files (listed with the files that call into it):\n", folder
            for (i = 1; i <= n; i++)
                for (key in edge) {
                    split(key, ft, SUBSEP)
                    if (ft[1] == left[i] && !(ft[2] in gone))
                        printf "  %s.c -> %s.c (%s)\n", ft[1], ft[2], edge[key]
                }
            exit 1
        }' || bad=$((bad + 1))
done
if ((bad)); then
    echo "file_cycles: $bad folder(s) with a cycle; move what both files need into a file below them"
    exit 1
fi
echo "file_cycles: ${#FOLDERS[@]} folders, $checked files, no file calls back into a file that calls it"
