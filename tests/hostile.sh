# hostile.sh — the table-driven hostile-input tests of the commands (sourced
# after lib.sh by tests/test_hostile_<command>.sh):
#
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
#   source "$(dirname "${BASH_SOURCE[0]}")/hostile.sh"
#   test_start test_hostile_x.sh "$@"
#   hostile_fixtures            # the shared files, in $WORK/fix (below)
#   ...make more files in fix/ ...
#   hostile_cases <<'EOF'
#   # exit | stderr fragment | arguments of meshtrain | after (optional)
#   2 | unknown axis 'foo' | explain --model gpt --mesh foo=2
#   1 | is a FIFO | report fifo
#   2 | same file as --data | train --data text.txt --trace text.txt | cmp -s text.txt ../fix/text.txt
#   EOF
#   test_end
#
# Each case runs in a fresh copy of fix/ (so a case that destroys a file
# cannot hide the next case's bug), under `timeout` (a hang is a failure:
# exit 124), as `eval "$BIN <arguments>"`. It passes when:
#   - the exit status is the one in the table;
#   - the fragment is on stderr (grep -F; "-" for none wanted); for a
#     failure, stderr's first line starts "meshtrain: " and stdout is not
#     unterminated JSON (a --json command that fails prints nothing or a
#     whole object);
#   - no sanitizer spoke (the suite runs these under ASan/UBSan);
#   - the optional after-check, a shell command run in the case's directory,
#     succeeds (e.g. that an input is unchanged, that no .tmp file is left).
# Fields are separated by " | "; a line starting with '#' or empty is skipped.
# HOSTILE_TIMEOUT (seconds, default 60) bounds each case.
#
#   hostile_busy NAME TMP ARGS...   the concurrent-writer rule: runs meshtrain
#                               ARGS in a fresh copy of fix/ while another
#                               process holds the lock of TMP (an output's
#                               "<path>.tmp", as a live run would); passes when
#                               it exits 1 saying another run is writing it,
#                               with nothing on stdout and TMP left alone

# The files most cases need, in $WORK/fix:
#   text.txt        a small text corpus (train --data)
#   fifo            a named pipe nobody writes
#   dir/            a directory
#   ro/             a directory nobody may write (skipped as root: see ro_ok)
#   empty           an empty file
hostile_fixtures() {
    mkdir -p "$WORK/fix" && cd "$WORK/fix" || exit 1
    local i
    for i in $(seq 1 200); do echo "the quick brown fox $i jumps over the lazy dog."; done >text.txt
    mkfifo fifo
    mkdir dir ro
    : >empty
    chmod a-w ro
    cd "$WORK" || exit 1
}

# Whether a read-only directory stops this user (root writes anyway).
ro_ok() { [ "$(id -u)" -ne 0 ]; }

# Runs one case; $1 the line's number, for the name.
hostile_one() {
    local n=$1 code=$2 frag=$3 args=$4 after=$5
    local name="case $n: meshtrain $args"
    rm -rf "$WORK/case" && cp -a "$WORK/fix" "$WORK/case" && cd "$WORK/case" || exit 1
    timeout -k 5 "${HOSTILE_TIMEOUT:-60}" bash -c "exec $(printf '%q' "$BIN") $args" \
        >out.txt 2>err.txt </dev/null
    local rc=$? why=""
    [ "$rc" -eq "$code" ] || why="exit $rc, want $code"
    [ "$rc" -eq 124 ] && why="$why (timed out: a hang)"
    if [ "$frag" != "-" ] && ! grep -qF -- "$frag" err.txt; then
        why="${why:+$why; }stderr lacks '$frag'"
    fi
    if [ "$code" -ne 0 ]; then
        head -1 err.txt | grep -q '^meshtrain: ' ||
            why="${why:+$why; }stderr does not start 'meshtrain: '"
        if [ -s out.txt ] && head -c1 out.txt | grep -q '{' &&
            ! python3 -c 'import json,sys; json.load(open("out.txt"))' 2>/dev/null; then
            why="${why:+$why; }stdout holds unterminated JSON"
        fi
    fi
    grep -qE 'runtime error:|AddressSanitizer|LeakSanitizer|ThreadSanitizer' err.txt &&
        why="${why:+$why; }a sanitizer reported"
    if [ -n "$after" ] && ! (eval "$after") >/dev/null 2>&1; then
        why="${why:+$why; }after-check failed: $after"
    fi
    # err.txt is where bad() looks
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
    cd "$WORK" || exit 1
}

# Reads the table on stdin (see the top of this file) and runs every case,
# through hostile_one or the runner $1 (called with the same arguments).
hostile_cases() {
    local run=${1:-hostile_one} line n=0 code frag args after rest
    while IFS= read -r line; do
        n=$((n + 1))
        [[ -z "${line// }" || $line == \#* ]] && continue
        code=${line%% | *}; rest=${line#* | }
        frag=${rest%% | *}; rest=${rest#* | }
        args=${rest%% | *}
        after=""
        [[ $rest == *" | "* ]] && after=${rest#* | }
        "$run" "$n" "$code" "$frag" "$args" "$after"
    done
}

hostile_busy() {
    local name=$1 tmp=$2
    shift 2
    rm -rf "$WORK/case" && cp -a "$WORK/fix" "$WORK/case" && cd "$WORK/case" || exit 1
    echo "held by another run" >"$tmp"
    # flock(1) holds the lock while the command runs: the command's own
    # open of TMP is another open file description, so its lock conflicts
    timeout -k 5 "${HOSTILE_TIMEOUT:-60}" flock "$tmp" "$BIN" "$@" >out.txt 2>err.txt </dev/null
    local rc=$? why=""
    [ "$rc" -eq 1 ] || why="exit $rc, want 1"
    grep -q "another run is writing it" err.txt || why="${why:+$why; }stderr does not say another run is writing it"
    [ -s out.txt ] && why="${why:+$why; }stdout is not empty"
    grep -qx "held by another run" "$tmp" || why="${why:+$why; }the other run's $tmp was touched"
    if [ -z "$why" ]; then ok "$name"; else bad "$name" "$why"; fi
    cd "$WORK" || exit 1
}
