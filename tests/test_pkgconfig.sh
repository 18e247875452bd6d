#!/usr/bin/env bash
# test_pkgconfig.sh — the installed library as a user meets it: the build dir
# installed into a new prefix (`cmake --install BUILD --prefix P`, a prefix
# that is not the configured one), then a small C program that includes
# <meshtrain.h> built with nothing but `pkg-config --cflags --libs meshtrain`
# (PKG_CONFIG_PATH=P/lib/pkgconfig) and run: against the shared library, and,
# with the shared one removed from a second prefix, statically
# (`pkg-config --static`: Requires.private and Libs.private). The programs
# run without LD_LIBRARY_PATH, as a user's would: the shared one starts only
# because meshtrain.pc's Libs carry -Wl,-rpath,${libdir} (MT_PC_RPATH; a
# build with it OFF runs them with LD_LIBRARY_PATH set to the prefix's
# libdir), and ldd must show it loading the prefix's libmeshtrain.so.
#
#   bash tests/test_pkgconfig.sh <meshtrain binary> <build dir>
#
# A sanitizer build's library needs the sanitizer's runtime: the program is
# then built with the same -fsanitize (MT_SANITIZE in CMakeCache.txt), or the
# test skips when that fails to link. No pkg-config or no C compiler: skips.
set -u

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
[ $# -ge 2 ] && set -- "$1" "$(realpath "$2")" "${@:3}"   # test_start cds away
test_start test_pkgconfig.sh "$@"

cache=$BUILD/CMakeCache.txt
if [ ! -f "$cache" ]; then
    echo "skip  $BUILD is not a CMake build dir (no CMakeCache.txt)"
    test_end
    exit
fi
cache_get() { sed -n "s/^$1:[A-Z]*=//p" "$cache" | head -1; }
CMAKE=$(cache_get CMAKE_COMMAND)
[ -x "$CMAKE" ] || CMAKE=cmake
CC=$(cache_get CMAKE_C_COMPILER)
[ -x "$CC" ] || CC=cc
SAN=$(cache_get MT_SANITIZE)
# -DMT_PC_RPATH=OFF (a package for the system libdir) leaves the run-time
# path out of Libs: the loader is then told the prefix's libdir, as a
# system install would not need
RPATH=$(cache_get MT_PC_RPATH)
if ! command -v pkg-config >/dev/null; then
    echo "skip  pkg-config not installed (apt-get install pkg-config)"
    test_end
    exit
fi

# the installed prefixes: lib/ wherever GNUInstallDirs put it (lib,
# lib/x86_64-linux-gnu, lib64); the first holds what cmake installs
install_into() {
    "$CMAKE" --install "$BUILD" --prefix "$1" >install.log 2>err.txt || return 1
    PC=$(find "$1" -name meshtrain.pc -path '*/pkgconfig/*' | head -1)
    [ -n "$PC" ]
}

cat >prog.c <<'EOF'
/* a user's program: a mesh, a status name, an error message, and a tiny
 * graph run forward (the kernels, hence BLAS, linked in) */
#include <meshtrain.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    mt_mesh *mesh = NULL;
    if (mt_mesh_create("data=2,tensor=2", 4, &mesh) != MT_OK) {
        fprintf(stderr, "mesh: %s\n", mt_errmsg());
        return 1;
    }
    printf("mesh %s: %d devices, axis 1 %s\n", mt_mesh_spec(mesh), mt_mesh_size(mesh),
           mt_mesh_axis_name(mesh, 1));
    mt_axes ax;
    mt_status s = mt_mesh_axes(mesh, "pipe", &ax);
    printf("unknown axis: %s (%s)\n", mt_status_name(s), strstr(mt_errmsg(), "pipe") ? "named" : "?");
    mt_mesh_free(mesh);

    mt_graph *g = mt_graph_create();
    int64_t xs[2] = {2, 3}, ws[2] = {3, 1};
    mt_tensor *x = mt_input(g, "x", MT_F32, 2, xs);
    mt_tensor *w = mt_param(g, "w", 2, ws, (mt_init){MT_INIT_NORMAL, 1.0f});
    mt_tensor *loss = mt_sum(g, mt_matmul(g, x, w, false, false));
    s = loss ? mt_graph_compile(g, loss, &(mt_compile_opts){.seed = 1, .no_grad = true})
             : mt_graph_status(g);
    if (s == MT_OK) {
        float *xv = mt_tensor_f32(mt_graph_find(g, "x")), *wv = mt_tensor_f32(w);
        for (int i = 0; i < 6; i++) xv[i] = 1.0f;
        for (int i = 0; i < 3; i++) wv[i] = (float)(i + 1);
        s = mt_graph_forward(g);
    }
    if (s != MT_OK) {
        fprintf(stderr, "graph: %s\n", mt_errmsg());
        return 1;
    }
    printf("loss %g\n", (double)mt_graph_loss(g));   /* 2 rows of 1+2+3 */
    mt_graph_free(g);
    return 0;
}
EOF
WANT="mesh data=2,tensor=2: 4 devices, axis 1 tensor
unknown axis: MT_EINVAL (named)
loss 12"

SANFLAGS=()
[ -n "$SAN" ] && SANFLAGS=(-fsanitize="$SAN")

# build_and_run NAME PREFIX [--static]: the program built from pkg-config's
# flags for the prefix, run; checks its output.
build_and_run() {
    local name=$1 prefix=$2 static=${3:-}
    local pcdir
    pcdir=$(dirname "$PC")
    # the .pc file must point into the prefix, not at the configured one
    local inc
    inc=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=includedir meshtrain)
    if [ ! -f "$inc/meshtrain.h" ]; then
        : >err.txt
        bad "$name: includedir" "'$inc' holds no meshtrain.h ($(grep '^prefix=' "$PC"))"
        return
    fi
    local flags
    if ! flags=$(PKG_CONFIG_PATH=$pcdir pkg-config $static --cflags --libs meshtrain 2>err.txt); then
        bad "$name: pkg-config" "exit $?"
        return
    fi
    # shellcheck disable=SC2086  # the flags are words
    if ! "$CC" -std=c11 -Wall -Wextra -Werror "${SANFLAGS[@]}" prog.c -o "prog$static" $flags \
            >err.txt 2>&1; then
        if [ -n "$SAN" ]; then
            echo "skip  $name: a program linked with -fsanitize=$SAN against the sanitized library failed"
            sed 's/^/      | /' err.txt | head -5
            return
        fi
        bad "$name: compile and link with '$flags'" "$CC failed"
        return
    fi
    # run as a user would: no LD_LIBRARY_PATH, so against the shared
    # library the program starts only if the .pc's Libs gave it a run-time
    # path (-Wl,-rpath) into the prefix
    local libdir got how="without LD_LIBRARY_PATH" ldpath=()
    libdir=$(PKG_CONFIG_PATH=$pcdir pkg-config --variable=libdir meshtrain)
    if [[ ${RPATH^^} =~ ^(OFF|0|NO|N|FALSE|IGNORE|NOTFOUND|.*-NOTFOUND)$ ]]; then
        ldpath=("LD_LIBRARY_PATH=$libdir")
        how="with LD_LIBRARY_PATH=$libdir (MT_PC_RPATH=$RPATH)"
    fi
    got=$(env -u LD_LIBRARY_PATH "${ldpath[@]}" timeout 30 "./prog$static" 2>err.txt)
    local rc=$?
    if [ "$rc" -ne 0 ]; then
        bad "$name: run $how" "exit $rc (pkg-config --libs gave '$flags')"
        return
    fi
    if [ "$got" != "$WANT" ]; then : >err.txt; bad "$name: output" "$got"; return; fi
    # and the libmeshtrain.so it loaded is the prefix's, not one the loader
    # found elsewhere (which would make the run above pass for nothing)
    if [ -z "$static" ] && command -v ldd >/dev/null; then
        local loaded
        loaded=$(env -u LD_LIBRARY_PATH "${ldpath[@]}" ldd "./prog$static" 2>/dev/null |
                 sed -n 's/^[[:space:]]*libmeshtrain\.so[^ ]* => \([^ ]*\) .*/\1/p')
        if [ -z "$loaded" ] || [ ! -e "$loaded" ] ||
           [ "$(dirname "$(realpath "$loaded")")" != "$(realpath "$libdir")" ]; then
            : >err.txt
            bad "$name: the library loaded" "'${loaded:-none}', want one in $libdir"
            return
        fi
    fi
    ok "$name"
}

if install_into "$WORK/p"; then
    ok "cmake --install --prefix"
    if grep -q '^prefix=/usr/local$' "$PC"; then
        : >err.txt
        bad "meshtrain.pc is relocatable" "it says $(grep '^prefix=' "$PC")"
    else
        ok "meshtrain.pc is relocatable ($(grep '^prefix=' "$PC"))"
    fi
    build_and_run "shared library through pkg-config" "$WORK/p"
    # the same install moved elsewhere still finds itself
    mv "$WORK/p" "$WORK/moved"
    PC=${PC/#$WORK\/p/$WORK/moved}
    build_and_run "a moved prefix" "$WORK/moved"
else
    bad "cmake --install --prefix" "$(tail -3 install.log)"
fi
# static: the archive alone in the prefix, so -lmeshtrain finds it
if install_into "$WORK/s"; then
    find "$WORK/s" -name 'libmeshtrain.so*' -delete
    build_and_run "static library through pkg-config --static" "$WORK/s" --static
else
    bad "cmake --install --prefix (static)" "$(tail -3 install.log)"
fi

test_end
