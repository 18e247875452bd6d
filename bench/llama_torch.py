#!/usr/bin/python3
"""llama_torch.py — the reference for bench_llama: the same LLaMA training step in PyTorch.

    /usr/bin/python3 bench/llama_torch.py [--quick] [THREADS [STEPS]]

The model is meshtrain's --model llama (src/models/llama.c): token embedding;
L pre-norm blocks of RMSNorm -> q, k, v without bias, RoPE on q and k in
llama2.c's pair convention (each head's (x[2i], x[2i+1]) rotated by
pos * theta^(-2i/HS)), causal grouped-query attention (KV kv heads, each read
by NH/KV query heads) -> wo -> residual, RMSNorm -> SwiGLU w2(silu(w1 x) * w3 x)
-> residual; final RMSNorm; an untied LM head; cross-entropy; AdamW (betas
0.9/0.95, eps 1e-8, decay 0.1) with global-norm clipping at 1.0, as
mt_optim_defaults(). Attention goes through
torch.nn.functional.scaled_dot_product_attention (is_causal; enable_gqa where
the installed torch has it, else the kv heads repeated) when torch has it, and
through the explicit masked softmax otherwise (Debian's torch 1.13 has no
SDPA; the line "attention: ..." says which ran). Sizes, batch, warm-up and
timed steps are bench_llama.c's. Run it with Debian's python3-torch
(/usr/bin/python3) and OMP_WAIT_POLICY=passive (see bench/run_gpt.sh). Prints
one "RESULT ..." line per run.
"""
import inspect
import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

from torch_util import set_threads, timed_steps

# bench_llama.c's LLAMA, BATCH, SEQ
L, DIM, NH, KV, FFN, V, T, B = 4, 512, 8, 2, 1408, 32000, 128, 4
THETA, EPS = 10000.0, 1e-5

SDPA = getattr(F, "scaled_dot_product_attention", None)
GQA_FLAG = SDPA is not None and "enable_gqa" in inspect.signature(SDPA).parameters
ATTENTION = ("sdpa, enable_gqa" if GQA_FLAG else "sdpa, kv heads repeated") if SDPA \
    else "explicit masked softmax, kv heads repeated (no sdpa in this torch)"


class RMSNorm(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(C))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * self.weight


def rope_tables(HS):
    """cos, sin (T, HS/2): angle pos * theta^(-2i/HS), in double as meshtrain's."""
    inv = THETA ** (-torch.arange(0, HS, 2, dtype=torch.float64) / HS)
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    return ang.cos().float(), ang.sin().float()


def rope(x, cos, sin):
    """x (B,T,H,HS): each pair (x[2i], x[2i+1]) rotated (llama2.c's run.c)."""
    xr = x.view(*x.shape[:-1], -1, 2)
    a, b = xr[..., 0], xr[..., 1]
    c, s = cos.view(1, T, 1, -1), sin.view(1, T, 1, -1)
    return torch.stack((a * c - b * s, a * s + b * c), dim=-1).flatten(-2)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.HS = DIM // NH
        self.wq = nn.Linear(DIM, NH * self.HS, bias=False)
        self.wk = nn.Linear(DIM, KV * self.HS, bias=False)
        self.wv = nn.Linear(DIM, KV * self.HS, bias=False)
        self.wo = nn.Linear(NH * self.HS, DIM, bias=False)
        self.register_buffer("mask", torch.tril(torch.ones(T, T, dtype=torch.bool)))

    def forward(self, x, cos, sin):
        Bx, Tx, _ = x.shape
        q = rope(self.wq(x).view(Bx, Tx, NH, self.HS), cos, sin).transpose(1, 2)  # (B,NH,T,HS)
        k = rope(self.wk(x).view(Bx, Tx, KV, self.HS), cos, sin).transpose(1, 2)  # (B,KV,T,HS)
        v = self.wv(x).view(Bx, Tx, KV, self.HS).transpose(1, 2)                  # (B,KV,T,HS)
        if GQA_FLAG:
            y = SDPA(q, k, v, is_causal=True, enable_gqa=True)
        else:
            k = k.repeat_interleave(NH // KV, dim=1)   # query head h reads kv head h // (NH/KV)
            v = v.repeat_interleave(NH // KV, dim=1)
            if SDPA:
                y = SDPA(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(self.HS))
                att = F.softmax(att.masked_fill(~self.mask, float("-inf")), dim=-1)
                y = att @ v
        return self.wo(y.transpose(1, 2).reshape(Bx, Tx, NH * self.HS))


class FeedForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.w1 = nn.Linear(DIM, FFN, bias=False)
        self.w2 = nn.Linear(FFN, DIM, bias=False)
        self.w3 = nn.Linear(DIM, FFN, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn_norm = RMSNorm(DIM)
        self.attn = Attention()
        self.ffn_norm = RMSNorm(DIM)
        self.ffn = FeedForward()

    def forward(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        return x + self.ffn(self.ffn_norm(x))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok_emb = nn.Embedding(V, DIM)
        self.h = nn.ModuleList([Block() for _ in range(L)])
        self.norm = RMSNorm(DIM)
        self.lm_head = nn.Linear(DIM, V, bias=False)   # untied
        cos, sin = rope_tables(DIM // NH)
        self.register_buffer("cos", cos)
        self.register_buffer("sin", sin)
        for name, p in self.named_parameters():   # meshtrain's initialisation
            if p.dim() == 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith(("wo.weight", "w2.weight")) else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, idx, targets):
        x = self.tok_emb(idx)
        for block in self.h:
            x = block(x, self.cos, self.sin)
        logits = self.lm_head(self.norm(x))
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))


def run(threads, steps, warmup):
    set_threads(threads)
    torch.manual_seed(1337)
    model = Llama()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1)
    idx = torch.randint(0, V, (B, T))
    tgt = torch.randint(0, V, (B, T))
    sec, first, _ = timed_steps(model, opt, idx, tgt, steps, warmup)
    load = open("/proc/loadavg").read().split()[0]
    print(f"RESULT impl=torch config=llama threads={threads} ms={sec * 1e3:.3f} "
          f"tok_s={B * T / sec:.1f} loss={first:.4f} load={load}", flush=True)


def main():
    args = sys.argv[1:]
    quick = bool(args) and args[0] == "--quick"
    args = args[1:] if quick else args
    if len(args) > 2 or (args and int(args[0]) <= 0):
        sys.exit("usage: llama_torch.py [--quick] [THREADS [STEPS]]")
    only_threads = int(args[0]) if args else 0
    steps = int(args[1]) if len(args) > 1 and int(args[1]) > 0 else (3 if quick else 10)
    warmup = 1 if quick else 2
    print(f"torch {torch.__version__} ({sys.executable}); attention: {ATTENTION}", flush=True)
    torch.set_num_interop_threads(1)
    for threads in ([only_threads] if only_threads else (1, 2)):
        run(threads, steps, warmup)


if __name__ == "__main__":
    main()
