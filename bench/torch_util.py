"""torch_util.py — what the PyTorch references share: the thread cap and
the timed training loop.

Imported by bench/gpt_torch.py, bench/dp_torch.py, bench/llama_torch.py and
bench/moe_torch.py (run from the repository root or bench/: Python puts the
script's folder on the path).
"""
import contextlib
import ctypes
import time

import torch


def set_threads(n):
    """torch.set_num_threads(n), and the same cap on Open BLAS's pool.
    Debian's torch (BLAS_INFO=generic) runs its float32 products on Open BLAS,
    whose threads torch.set_num_threads does not reach and which starts a
    thread a core: without this a 1-thread contender ran its products on
    every core (measured 2026-12-07: torch.mm 1024^3 at 156-209 GFLOP/s
    "on one thread" against 101-105 capped, a 2-core Zen 4)."""
    torch.set_num_threads(n)
    for name in ("libopenblas.so.0", "libblas.so.3"):   # the one torch loaded
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        cap = getattr(lib, "openblas_set_num_threads", None)
        if cap is not None:
            cap(ctypes.c_int(n))


def median(v):
    """The median of a non-empty list (sorted in place)."""
    v.sort()
    n = len(v)
    return v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])


def timed_steps(model, opt, idx, tgt, steps, warmup, bf16=False):
    """`warmup` untimed then `steps` timed training steps of model(idx, tgt):
    forward (under bf16 autocast when asked), backward, global-norm clipping
    at 1.0, opt.step(), gradients dropped. Returns (median seconds a step, the
    first step's loss, the last step's loss)."""
    times, first = [], None
    for i in range(-warmup, steps):
        t0 = time.perf_counter()
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext():
            loss = model(idx, tgt)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i >= 0:
            times.append(time.perf_counter() - t0)
        if first is None:
            first = loss.item()
    return median(times), first, loss.item()
