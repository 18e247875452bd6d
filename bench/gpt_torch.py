#!/usr/bin/python3
"""gpt_torch.py — the reference for bench_gpt: the same GPT training step in PyTorch.

    /usr/bin/python3 bench/gpt_torch.py [v50k|v256|gpt2|all [THREADS [STEPS]]]

The model is llm.c's train_gpt2.py: learned positions, pre-LayerNorm blocks
(causal self-attention, then a 4C MLP with tanh GELU), final LayerNorm, LM head
tied to the token embedding (Vp rows; the loss sees the first V logits), and
AdamW (betas 0.9/0.95, eps 1e-8, decay 0.1) with global-norm clipping at 1.0,
as meshtrain's mt_optim_defaults(). Sizes, batch, warm-up and timed steps are
bench_gpt.c's. Run it with Debian's python3-torch (/usr/bin/python3) and
OMP_WAIT_POLICY=passive: that build uses the system Open BLAS, whose thread
pool otherwise fights torch's own. Prints one "RESULT ..." line per run.
"""
import math
import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from torch_util import set_threads, timed_steps

CONFIGS = {
    #        L   C    NH  maxT  V      Vp     B  T     steps warmup threads
    "v50k": (4, 256, 4, 64, 50257, 50304, 4, 64, 20, 3, (1, 2)),
    "v256": (4, 256, 4, 64, 256, 256, 4, 64, 20, 3, (1, 2)),
    "gpt2": (12, 768, 12, 1024, 50257, 50304, 1, 1024, 2, 1, (2,)),
}


class NewGELU(nn.Module):
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class CausalSelfAttention(nn.Module):
    def __init__(self, C, NH, maxT):
        super().__init__()
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.NH, self.C = NH, C
        self.register_buffer("bias", torch.tril(torch.ones(maxT, maxT)).view(1, 1, maxT, maxT))

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.C, dim=2)
        q = q.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        k = k.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        v = v.view(B, T, self.NH, C // self.NH).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, C):
        super().__init__()
        self.c_fc = nn.Linear(C, 4 * C)
        self.gelu = NewGELU()
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        return self.c_proj(self.gelu(self.c_fc(x)))


class Block(nn.Module):
    def __init__(self, C, NH, maxT):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.attn = CausalSelfAttention(C, NH, maxT)
        self.ln_2 = nn.LayerNorm(C)
        self.mlp = MLP(C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, L, C, NH, maxT, V, Vp):
        super().__init__()
        self.V = V
        self.remat = False   # TORCH_REMAT=full sets it (run below)
        self.wte = nn.Embedding(Vp, C)
        self.wpe = nn.Embedding(maxT, C)
        self.h = nn.ModuleList([Block(C, NH, maxT) for _ in range(L)])
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, Vp, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2
        for m in self.modules():  # llm.c's initialisation
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, idx, targets):
        B, T = idx.size()
        pos = torch.arange(0, T, dtype=torch.long)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            # TORCH_REMAT=full: each block's forward again in the backward,
            # as meshtrain's --remat full
            x = checkpoint(block, x, use_reentrant=False) if self.remat else block(x)
        logits = self.lm_head(self.ln_f(x))
        # padded columns past V are not part of the vocabulary
        return F.cross_entropy(logits[..., : self.V].reshape(-1, self.V), targets.view(-1))


def run(name, threads, steps_arg):
    L, C, NH, maxT, V, Vp, B, T, steps, warmup, _ = CONFIGS[name]
    steps = steps_arg or steps
    set_threads(threads)
    torch.manual_seed(1337)
    model = GPT(L, C, NH, maxT, V, Vp)
    model.remat = os.environ.get("TORCH_REMAT", "none") == "full"
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    idx = torch.randint(0, V, (B, T))
    tgt = torch.randint(0, V, (B, T))
    # TORCH_PRECISION=bf16 (bench/run_precision.sh): bf16 autocast, as
    # meshtrain's --precision bf16 (matmuls in bf16, parameters in f32)
    bf16 = os.environ.get("TORCH_PRECISION", "fp32") == "bf16"
    sec, _, loss = timed_steps(model, opt, idx, tgt, steps, warmup, bf16)
    tokens = B * T
    print(f"RESULT impl=torch config={name} threads={threads} ms={sec * 1e3:.3f} "
          f"tok_s={tokens / sec:.1f} loss={loss:.4f} precision={'bf16' if bf16 else 'fp32'} "
          f"remat={'full' if model.remat else 'none'}",
          flush=True)


def main():
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    only_threads = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    if which != "all" and which not in CONFIGS:
        sys.exit(f"gpt_torch.py: unknown config '{which}' (v50k, v256, gpt2 or all)")
    print(f"torch {torch.__version__} ({sys.executable})", flush=True)
    torch.set_num_interop_threads(1)
    for name in CONFIGS:
        if which not in ("all", name):
            continue
        for threads in ([only_threads] if only_threads else CONFIGS[name][10]):
            run(name, threads, steps)


if __name__ == "__main__":
    main()
