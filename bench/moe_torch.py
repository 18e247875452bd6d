"""moe_torch.py — bench/bench_moe_layer.c's MoE layer in plain PyTorch, the
contender of issue 42's layer benchmark (run beside it by bench/run_moe.sh).

The layer as a PyTorch user writes it without a fused MoE kernel (the
pattern of Mixtral's Hugging Face block, torchtitan's reference loop and
the issue's "router, top-k, index_add combine"): a linear router, softmax,
top-k renormalised, then for each expert its tokens gathered by index, a
SwiGLU expert, the gated rows added back with index_add_; the loss
sum(out * r) plus the aux loss (alpha * E * sum f_e P_e) and the z-loss
(beta * mean logsumexp^2), as meshtrain's. Forward and backward, float32,
the median of the repetitions after one warm-up.

    python3 bench/moe_torch.py [--quick] [tiny|wide] [THREADS]

Prints: moe_layer_torch shape=.. N=.. C=.. F=.. E=.. k=.. threads=.. ms=.. gflops=..
"""
import sys
import time

import torch

from torch_util import median, set_threads

SHAPES = {"tiny": (4096, 64, 64), "wide": (4096, 256, 512)}   # bench_moe_layer.c's: N, C, F
E, K = 8, 2
NTOK, C, F = SHAPES["tiny"]


class MoE(torch.nn.Module):
    def __init__(self):
        super().__init__()
        p = lambda *s: torch.nn.Parameter(torch.randn(*s) * 0.02)
        self.wr = p(E, C)      # router (E, C), x @ wr.T
        self.w1 = p(E, C, F)
        self.w3 = p(E, C, F)
        self.w2 = p(E, F, C)

    def forward(self, x, r):
        u = x @ self.wr.t()                                   # (N, E)
        probs = torch.softmax(u, dim=-1)
        top, ids = torch.topk(probs, K, dim=-1)               # (N, k)
        gates = top / top.sum(dim=-1, keepdim=True)
        out = torch.zeros_like(x)
        for e in range(E):
            tok, slot = torch.where(ids == e)
            if tok.numel() == 0:
                continue
            xe = x[tok]                                       # (n_e, C)
            h = torch.nn.functional.silu(xe @ self.w1[e]) * (xe @ self.w3[e])
            ye = (h @ self.w2[e]) * gates[tok, slot].unsqueeze(-1)
            out.index_add_(0, tok, ye)
        f = torch.bincount(ids.flatten(), minlength=E).float() / (NTOK * K)
        aux = 0.01 * E * (f * probs.mean(dim=0)).sum()
        z = 1e-3 * torch.logsumexp(u, dim=-1).pow(2).mean()
        return (out * r).sum() + aux + z


def main():
    args = sys.argv[1:]
    quick = bool(args) and args[0] == "--quick"
    if quick:
        args = args[1:]
    name = "tiny"
    if args and args[0] in SHAPES:
        name, args = args[0], args[1:]
    global NTOK, C, F
    NTOK, C, F = SHAPES[name]
    threads = int(args[0]) if args else 1
    set_threads(threads)
    torch.manual_seed(0)
    layer = MoE()
    x = torch.randn(NTOK, C, requires_grad=True)
    r = torch.randn(NTOK, C)
    times = []
    # bench_moe_layer.c's repetitions: 21 at tiny, 9 at wide
    for i in range(-1, 3 if quick else 21 if name == "tiny" else 9):
        t0 = time.perf_counter()
        loss = layer(x, r)
        loss.backward()
        if i >= 0:
            times.append(time.perf_counter() - t0)
        layer.zero_grad(set_to_none=True)
        x.grad = None
    sec = median(times)
    flops = 18.0 * NTOK * K * C * F + 6.0 * NTOK * C * E
    print(f"moe_layer_torch shape={name} N={NTOK} C={C} F={F} E={E} k={K} threads={threads} "
          f"ms={sec * 1e3:.2f} gflops={flops / sec / 1e9:.2f}", flush=True)


if __name__ == "__main__":
    main()
