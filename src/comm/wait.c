/*
 * wait.c — failing a launch, and waiting in a collective: the one wait step
 * every transport's wait loop takes, and the messages of a wait given up.
 *
 * Failure: the first device to fail claims the launch's failed_* fields and
 * then raises `abort` (release); every wait loop polls `abort` (acquire), so a
 * device stuck in a collective returns MT_EABORTED within one wait step (or,
 * in a rendezvous that already committed, once its peers' bounded copying is
 * done) and nobody is left hanging.
 *
 * Waiting: spinning costs nothing while every device has a core of its own,
 * and beats any wake-up; with more devices than cores a spinner steals the
 * core its peer needs, so it yields at once, and after a few yields sleeps.
 * A long wait (a peer computing, or gone) sleeps so it gives the core away.
 *
 * Sleeping with more devices than cores: an event count (the launch's
 * wake_seq). A device about to sleep reads wake_seq, looks at its
 * condition once more (its wait loop does), and sleeps only while wake_seq
 * is still what it read (a futex); whatever may end a wait bumps wake_seq
 * after its store and wakes the sleepers (mt__wait_wake). A store before
 * the read is seen by the look; one after it changes wake_seq, and the
 * futex does not sleep. Before, the sleeper napped 50 µs a step: on a
 * 2-core Zen 5 (2026-12-04, test_plan_validate's GPT on data=2,pipe=2 1f1b,
 * 4 devices) the napping devices woke ~40,000 times a second, each time
 * taking the core from a device that computes, and the step used 126-136
 * core-ms where its work is ~115 (longer naps: fewer wake-ups, later
 * hand-offs, the same step). With the event count `meshtrain train`'s
 * steps went 71-73 -> 68-72 ms there and 83-84 -> 76-77 ms on
 * data=2,tensor=2,pipe=2 (8 devices); data=4 and data=8 stayed within
 * their noise.
 */
#include "base/arch_impl.h"
#include "comm/transport_impl.h"

#include <limits.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <time.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define SPIN_LIMIT   2000    /* pause rounds before yielding (~ a few µs) */
#define SLEEP_AFTER  10e-3   /* seconds of waiting after which each step sleeps */
#define NAP_NS       50000   /* a sleeping wait step */
#define DOZE_MAX     0.5     /* the longest event-count sleep, seconds: a wake-up
                                missed would cost up to this, which test_comm's
                                sleeping_waits_are_woken would see */
/* Yields after which a device that shares its core (more devices than
 * cores) sleeps in every wait step. A yielding device stays runnable and
 * the scheduler keeps giving it turns that the devices with work need: on
 * a 2-core Zen 5 (2026-12-04, test_plan_validate's GPT, L=4 C=256 T=64
 * B=8) data=2,tensor=2 went from 76-88 to 64 ms a step, data=2,pipe=2 1f1b
 * from 78-86 to 74-75 and `train` on it from 93 to 68 ms; data=4 and data=8
 * stayed within their noise, and the 8-byte all-reduce on 4 and 8 devices
 * did not slow down (7.6 -> 7.1-9.3 us, 16.6 -> 13.1 us): a peer that is
 * about to come comes within the first yields. */
#define SHARED_YIELDS 8

/* ======================================================================== */
/* Failing the launch                                                        */
/* ======================================================================== */

mt_status mt__launch_fail(mt_launch_state *ls, int device, mt_status status, const char *msg) {
    int expected = 0;
    if (atomic_compare_exchange_strong(&ls->fail_claimed, &expected, 1)) {
        ls->failed_device = device;
        ls->failed_status = status;
        snprintf(ls->failed_msg, sizeof ls->failed_msg, "%s", msg ? msg : "");
        /* publishes failed_* to every device that sees abort */
        atomic_store_explicit(&ls->abort, 1, memory_order_release);
        mt__wait_wake(ls);
    }
    return status;
}

static mt_status aborted(mt_ctx *ctx) {
    mt_launch_state *ls = ctx->launch;
    if (ls->failed_device == ctx->device)
        return mt_fail(MT_EABORTED, "%s", ls->failed_msg);
    return mt_fail(MT_EABORTED, "device %d stopped in %s: device %d failed: %s", ctx->device,
                   ctx->record->text[0] ? ctx->record->text : "its collective",
                   ls->failed_device, ls->failed_msg);
}

static mt_status timed_out(mt_ctx *ctx, const mt_group *g, const int *waiting_for, int n_waiting) {
    mt_launch_state *ls = ctx->launch;
    char msg[1024];
    int off = snprintf(msg, sizeof msg, "timed out after %g s in %s: ", ls->timeout_s,
                       ctx->record->text[0] ? ctx->record->text : "a collective");
    int missing[64];
    int n = 0;
    if (waiting_for) {
        for (int i = 0; i < n_waiting && n < 64; i++) missing[n++] = waiting_for[i];
    } else if (g) {
        /* collectives only: sends and receives differ from device to device */
        uint64_t mine = atomic_load(&ctx->record->n_coll);
        for (int i = 0; i < g->size && n < 64; i++) {
            int d = g->members[i];
            if (d != ctx->device && atomic_load(&ls->records[d].n_coll) < mine) missing[n++] = d;
        }
    }
    if (n == 0) {
        off += snprintf(msg + off, sizeof msg - (size_t)off, "the other devices of the group over "
                        "%s did not arrive", g ? g->label : "its axes");
    } else {
        off += snprintf(msg + off, sizeof msg - (size_t)off, "device%s", n > 1 ? "s" : "");
        for (int i = 0; i < n && off < (int)sizeof msg; i++)
            off += snprintf(msg + off, sizeof msg - (size_t)off, "%s %d", i ? "," : "", missing[i]);
        off += snprintf(msg + off, sizeof msg - (size_t)off, " never arrived");
        for (int i = 0; i < n && off < (int)sizeof msg - 1; i++) {
            char rec[160];
            const mt_device_record *r = &ls->records[missing[i]];
            mt__record_text(ls, r, rec, sizeof rec);
            off += snprintf(msg + off, sizeof msg - (size_t)off, "; device %d's last collective: %s%s",
                            missing[i], rec[0] ? rec : "none",
                            rec[0] ? (atomic_load(&r->in_collective) ? " (still in it)"
                                                                     : " (finished)") : "");
        }
    }
    if (off < (int)sizeof msg - 1)
        snprintf(msg + off, sizeof msg - (size_t)off, "; check that every device of the group "
                 "issues the same collectives, or raise the timeout (MT_COMM_TIMEOUT, seconds)");
    mt__launch_fail(ls, ctx->device, MT_ETIMEOUT, msg);
    return mt_fail(MT_ETIMEOUT, "%s", msg);
}

/* ======================================================================== */
/* Waiting                                                                   */
/* ======================================================================== */

void mt__wait_wake(mt_launch_state *ls) {
    /* seq_cst, with the sleeper's: either it counts itself in before our
     * load (and is woken), or its futex sees the bumped count */
    atomic_fetch_add(&ls->wake_seq, 1);
#ifdef __linux__
    if (atomic_load(&ls->sleepers) > 0)
        syscall(SYS_futex, (uint32_t *)&ls->wake_seq, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
#endif
}

/* The sleeping step of wait `s` (the caller's spin count): sleeps while the
 * launch's event count is what the previous step (s - 1) read, before its
 * loop's last look at the condition, then reads it for the next. */
static void doze(mt_ctx *ctx, int s) {
    mt_launch_state *ls = ctx->launch;
#ifdef __linux__
    if (ctx->doze_at == s - 1) {
        double left = fmin(ctx->deadline - mt_time_now(), DOZE_MAX);
        /* past the deadline, a wait that may not end (a committed op's
           peers' bounded copying) still gives the core away */
        if (left <= 0) left = NAP_NS * 1e-9;
        struct timespec ts = {(time_t)left, (long)((left - floor(left)) * 1e9)};
        atomic_fetch_add(&ls->sleepers, 1);
        syscall(SYS_futex, (uint32_t *)&ls->wake_seq, FUTEX_WAIT_PRIVATE, ctx->doze_seq, &ts,
                NULL, 0);
        atomic_fetch_sub(&ls->sleepers, 1);
    }
    ctx->doze_seq = atomic_load(&ls->wake_seq);
    ctx->doze_at = s;
#else
    (void)s;
    static const struct timespec nap = {0, NAP_NS};
    nanosleep(&nap, NULL);
#endif
}

mt_status mt__wait_step(mt_ctx *ctx, int *spins) {
    mt_launch_state *ls = ctx->launch;
    int s = (*spins)++;
    /* a wait that may not end (a committed rendezvous) can run for hours:
     * keep the counter from overflowing, and on the same residue mod 64 so
     * the sleeping below goes on */
    if (s >= (1 << 30)) *spins -= 1 << 20;
    if (ls->may_spin && s < SPIN_LIMIT) {
        mt__cpu_relax();
        /* the clock and the abort flag every 64 rounds keep spinning cheap */
        if ((s & 63) != 63) return MT_OK;
    } else {
        static const struct timespec nap = {0, NAP_NS};
        int y = ls->may_spin ? s - SPIN_LIMIT : s;
        if (!ls->may_spin && y >= SHARED_YIELDS) {
            /* more devices than cores, and the peer did not come within a
               few yields: it computes, or waits for a core itself */
            doze(ctx, s);
        } else if (y > 2000 && y % 64 == 0) {
            /* long waits (a peer computing, or gone) sleep so they give the core away */
            double waited = ls->timeout_s - (ctx->deadline - mt_time_now());
            if (waited > SLEEP_AFTER) nanosleep(&nap, NULL);
            else sched_yield();
        } else {
            sched_yield();
        }
    }
    if (atomic_load_explicit(&ls->abort, memory_order_acquire)) return MT_EABORTED;
    if (mt_time_now() > ctx->deadline) return MT_ETIMEOUT;
    return MT_OK;
}

mt_status mt__wait_fail(mt_ctx *ctx, const mt_group *g, mt_status st, const int *waiting_for,
                        int n_waiting) {
    if (st == MT_ETIMEOUT) return timed_out(ctx, g, waiting_for, n_waiting);
    /* the launch has failed: make sure its failure is published first */
    while (!atomic_load_explicit(&ctx->launch->abort, memory_order_acquire)) sched_yield();
    return aborted(ctx);
}

