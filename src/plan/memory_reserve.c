/*
 * memory_reserve.c — what a GPU training process holds besides its tensors
 * (the runtime's and the allocator's reserve), and the verdict on a
 * device's bytes with its margin (plan/memory.h).
 *
 * The reserve belongs to the frameworks that run on the CUDA runtime
 * (MEGATRON, DEEPSPEED, TORCHTITAN: PyTorch processes): meshtrain's own
 * convention counts its own allocator, and MIXED16 and BOOK are the
 * papers' counts, which leave it out. The constants that belong to the chip
 * and its runtime are keyed by the hardware's name, each with its source;
 * a chip the table does not know (TPUs, whose XLA runtime holds no CUDA
 * context; a host of threads) has none.
 */
#include "plan/memory.h"

#include <stdio.h>
#include <string.h>

#define MiB (1024.0 * 1024.0)
#define GiB (1024.0 * MiB)

/* One kind of chip: what its runtime holds a process. */
typedef struct {
    const char *prefix;        /* of the hardware's name: "h100" for h100-sxm, h100-pcie */
    double      cuda_context;  /* bytes: the CUDA context and the framework's kernels */
    double      cublas_ws;     /* bytes: one cuBLASLt workspace */
} chip_runtime;

/* The CUDA context: a PyTorch process's floor after its first CUDA call,
 * 723 MiB (discuss.pytorch.org/t/73021, "what is the reason for pytorch's
 * GPU memory floor": "goes from zero to 723 MiB ... the first CUDA call
 * creates the CUDA context"), taken for every GPU kind.
 * The cuBLASLt workspace: PyTorch's (aten/src/ATen/cuda/CUDABlas.cpp,
 * pytorch#120925, after the cuBLAS API reference's cublasSetWorkspace
 * recommendation: 32 MiB on Hopper, 4 MiB before): 32768 KiB from sm90 on,
 * 4096 KiB on sm80 with 24 GB or more, 1024 KiB otherwise. */
static const chip_runtime CHIPS[] = {
    {"v100", 723 * MiB, 1 * MiB},     /* Volta, sm70 */
    {"a100", 723 * MiB, 4 * MiB},     /* Ampere, sm80, 40 and 80 GB */
    {"h100", 723 * MiB, 32 * MiB},    /* Hopper, sm90 */
    {"h200", 723 * MiB, 32 * MiB},
    {"gh200", 723 * MiB, 32 * MiB},
    {"b200", 723 * MiB, 32 * MiB},    /* Blackwell, sm100 (PyTorch: major >= 9) */
    {"gb200", 723 * MiB, 32 * MiB},
};

/* NCCL's buffers a communicator: NCCL_BUFFSIZE (4 MiB, NCCL's environment
 * variables documentation, the default) for each of a ring's two
 * connections (to the previous and the next rank) on each channel, at most
 * MAXCHANNELS = 32 of them (NCCL's src/include/device.h): 256 MiB, the bound
 * NCCL opens when it uses every channel. */
#define NCCL_BUFFSIZE (4 * MiB)
#define NCCL_CONNECTIONS 2
#define NCCL_MAX_CHANNELS 32

/* The caching allocator's fragmentation: (reserved - allocated) / reserved
 * averaged 15 % over eight LLMs trained with recomputation, ZeRO and
 * offloading on A100 80 GB (Guo et al., "GMLake", ASPLOS 2024, abstract:
 * GMLake reduced it by that much on average, up to 33 %). Counted on the
 * bytes allocated and freed through a step (activations, temporaries): the
 * model states are allocated once, into the frameworks' flat buffers. */
#define FRAGMENTATION 0.15

static const chip_runtime *chip_of(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof CHIPS / sizeof *CHIPS; i++)
        if (!strncmp(name, CHIPS[i].prefix, strlen(CHIPS[i].prefix))) return &CHIPS[i];
    return NULL;
}

double mt__plan_mem_reserve(mt_plan_memory conv, const char *hw_name, int communicators,
                            double churn) {
    if (conv != MT_PLAN_MEMORY_MEGATRON && conv != MT_PLAN_MEMORY_DEEPSPEED &&
        conv != MT_PLAN_MEMORY_TORCHTITAN)
        return 0;
    const chip_runtime *c = chip_of(hw_name);
    if (!c) return 0;
    const double nccl = (communicators > 0 ? communicators : 0) * NCCL_BUFFSIZE *
                        NCCL_CONNECTIONS * NCCL_MAX_CHANNELS;
    const double frag = churn > 0 ? churn * FRAGMENTATION / (1 - FRAGMENTATION) : 0;
    return c->cuda_context + c->cublas_ws + nccl + frag;
}

void mt__plan_mem_verdict(mt_plan_memory conv, double total, double hbm, const char *hw_name,
                          const char *unsplit, double *margin, char *why, size_t cap) {
    *margin = hbm - total;
    why[0] = '\0';
    if (total <= hbm) return;
    const char *hw = hw_name && *hw_name ? hw_name : "device";
    if (conv != MT_PLAN_MEMORY_DEEPSPEED && conv != MT_PLAN_MEMORY_TORCHTITAN && unsplit &&
        *unsplit)
        snprintf(why, cap, "sizes do not divide: %s, kept whole on every device; %.2f GiB a "
                 "device, %.2f GiB over the %s's %.2f GiB (pick sizes that divide, or --memory "
                 "deepspeed|torchtitan, which pad)", unsplit, total / GiB, -*margin / GiB, hw,
                 hbm / GiB);
    else
        snprintf(why, cap, "out of memory: %.2f GiB a device, %.2f GiB over the %s's %.2f GiB",
                 total / GiB, -*margin / GiB, hw, hbm / GiB);
}
