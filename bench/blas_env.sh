# blas_env.sh — sourced by the benchmark scripts: the Open BLAS kernel every
# contender of a run uses (meshtrain and PyTorch load the same library).
#
# The environment's OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset, so that
# Open BLAS picks the machine's own kernel. Debian's 0.3.21 does not know every
# CPU it meets: on one it does not recognise (a Sapphire Rapids class Xeon,
# measured 2026-11-30) it falls back to Prescott's SSE3 kernel, 30 GFLOP/s a
# core where its Cooperlake kernel gives 144. Then the newest kernel the CPU's
# flags support is named instead (Cooperlake: AVX-512 with bf16; SkylakeX:
# AVX-512; Haswell: AVX2), and the scripts print which kernel ran.
unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE
blas_core() {
    /usr/bin/python3 - <<'PY' 2>/dev/null || echo unknown
import ctypes
lib = ctypes.CDLL("libopenblas.so.0")
lib.openblas_get_corename.restype = ctypes.c_char_p
print(lib.openblas_get_corename().decode())
PY
}
BLAS_DETECTED=$(blas_core)
case "$BLAS_DETECTED" in
    Prescott|Core2|Penryn|Dunnington|Nehalem|Atom|Katmai|Coppermine|Northwood|Banias|unknown)
        flags=$(grep -m1 '^flags' /proc/cpuinfo)
        case " $flags " in
            *" avx512_bf16 "*) export OPENBLAS_CORETYPE=Cooperlake ;;
            *" avx512f "*)     export OPENBLAS_CORETYPE=SkylakeX ;;
            *" avx2 "*)        export OPENBLAS_CORETYPE=Haswell ;;
        esac ;;
esac
echo "Open BLAS kernel: $(blas_core)${OPENBLAS_CORETYPE:+ (OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE, Open BLAS detected $BLAS_DETECTED)}"
