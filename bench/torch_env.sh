# torch_env.sh — sourced by the benchmarks that run a PyTorch contender in
# the same run: PY is Debian's python3 (with python3-torch; not a pyenv or
# venv python) and HAVE_TORCH 1 when it imports torch, else 0, said once.
PY=/usr/bin/python3
HAVE_TORCH=1
"$PY" -c 'import torch' 2>/dev/null || HAVE_TORCH=0
[[ $HAVE_TORCH == 1 ]] || echo "== PyTorch: $PY cannot import torch" \
    "(apt-get install python3-torch); its column stays empty"
