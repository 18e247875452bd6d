#!/usr/bin/python3
"""dp_torch.py — the reference for bench_dp: PyTorch DDP on the same GPT.

    /usr/bin/python3 bench/dp_torch.py [STEPS]

bench_gpt's v50k model (gpt_torch.py's GPT: L=4 C=256 NH=4 T=64, V=50257,
tied LM head), AdamW and global-norm clipping as meshtrain's defaults, global
batch B=8 as bench_dp.c. Rows: one process with 1 thread, and
DistributedDataParallel over gloo with 2 processes of 1 thread each, each
taking B/2 of the batch (gradients averaged by DDP's bucketed all-reduce,
which overlaps the backward). Prints one "RESULT ..." line per row.
"""
import os
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_torch import GPT  # noqa: E402
from torch_util import set_threads, timed_steps  # noqa: E402

L, C, NH, T, V, Vp, GLOBAL_B, WARMUP = 4, 256, 4, 64, 50257, 50304, 8, 2




def train(model, B, steps, rank):
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    g = torch.Generator().manual_seed(7)
    idx = torch.randint(0, V, (GLOBAL_B, T), generator=g)[rank * B:(rank + 1) * B]
    tgt = torch.randint(0, V, (GLOBAL_B, T), generator=g)[rank * B:(rank + 1) * B]
    sec, _, loss = timed_steps(model, opt, idx, tgt, steps, WARMUP)
    return sec, loss


def ddp_worker(rank, world, steps, port, out):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    set_threads(1)
    torch.set_num_interop_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(1337)
    model = torch.nn.parallel.DistributedDataParallel(GPT(L, C, NH, T, V, Vp))
    sec, loss = train(model, GLOBAL_B // world, steps, rank)
    if rank == 0:
        out.put((sec, loss))
    dist.destroy_process_group()


def main():
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    print(f"torch {torch.__version__} ({sys.executable})", flush=True)
    set_threads(1)
    torch.set_num_interop_threads(1)
    torch.manual_seed(1337)
    sec, loss = train(GPT(L, C, NH, T, V, Vp), GLOBAL_B, steps, 0)
    print(f"RESULT impl=torch row=1dev-1thread tok_s={GLOBAL_B * T / sec:.1f} loss={loss:.4f}", flush=True)
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=ddp_worker, args=(r, 2, steps, port, out)) for r in range(2)]
    for p in procs:
        p.start()
    sec, loss = out.get()
    for p in procs:
        p.join()
    print(f"RESULT impl=torch row=ddp2-gloo tok_s={GLOBAL_B * T / sec:.1f} loss={loss:.4f}", flush=True)


if __name__ == "__main__":
    main()
