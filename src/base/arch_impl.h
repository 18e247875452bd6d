/*
 * arch_impl.h — the few CPU instructions the spin loops and the streaming
 * stores need, per architecture (internal). Everything else in meshtrain is
 * portable C11; this header is where the platform is named, so the callers
 * (base/pool.c, comm/wait.c, comm/threads.c) do not.
 *
 *   mt__cpu_relax()          one round of a spin-wait
 *   mt__stream_line(d, v)    store 64 bytes from v at d (16-byte aligned)
 *                            past the cache where the CPU can
 *   mt__store_fence()        orders every store before it, streamed ones
 *                            included, before every store after it
 *
 * Elsewhere than x86-64 and AArch64 they fall back to plain C: no hint in a
 * spin, a memcpy, a release fence.
 */
#ifndef MT_ARCH_IMPL_H
#define MT_ARCH_IMPL_H

#include <stdatomic.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

/* PAUSE: tells the core it is spinning (saves power, lets the sibling
 * hyperthread run, and avoids the memory-order flush when the flag changes). */
static inline void mt__cpu_relax(void) { _mm_pause(); }

/* MOVNTDQ: non-temporal stores go to memory without reading the line
 * first, and do not evict what the reader still needs from the cache. */
static inline void mt__stream_line(void *d, const void *v) {
    const __m128i *s = v;
    __m128i *o = d;
    for (int q = 0; q < 4; q++) _mm_stream_si128(o + q, _mm_loadu_si128(s + q));
}

/* Non-temporal stores are weakly ordered even on x86: a release store (a
 * plain MOV under TSO) does not order them, SFENCE does. */
static inline void mt__store_fence(void) { _mm_sfence(); }

#else

#if defined(__aarch64__)
/* YIELD: the spin-loop hint (gcc 12's arm_acle.h has no __yield for
 * AArch64). The flags spun on are atomics, so the compiler reloads them
 * anyway; "memory" only keeps it from moving other accesses across. */
static inline void mt__cpu_relax(void) { __asm__ __volatile__("yield" ::: "memory"); }
#else
static inline void mt__cpu_relax(void) { __asm__ __volatile__("" ::: "memory"); }
#endif

/* Plain stores through the cache: AArch64's STNP is only a hint, which many
 * cores ignore for write-allocation, and nobody has measured it here; a
 * 64-byte memcpy compiles to two LDP/STP pairs of q registers. */
static inline void mt__stream_line(void *d, const void *v) { memcpy(d, v, 64); }

/* The stores above are ordinary ones, so the release that publishes them
 * (`done`, `finished`) already orders them. The fence keeps the contract
 * for a caller that publishes with a relaxed store; it is one DMB ISH per
 * streamed copy, not per line. */
static inline void mt__store_fence(void) { atomic_thread_fence(memory_order_release); }

#endif

#endif /* MT_ARCH_IMPL_H */
