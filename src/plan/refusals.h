/*
 * plan/refusals.h — the reasons a search refused layouts, one entry a
 * reason with its count (refusals.c), for mt_plan_report.refusals: a
 * search of half a million layouts refuses most of them for a few dozen
 * reasons that differ only in their numbers ("2048 sequences a step do not
 * split into 3 microbatches"), and says each once.
 */
#ifndef MT_PLAN_REFUSALS_H
#define MT_PLAN_REFUSALS_H

#include "meshtrain/plan.h"

#include <stdint.h>

/* The numbers of a reason kept as ranges; past them a number is part of
 * the reason's text (so reasons that differ there are two). */
#define MT__PLAN_REFUSAL_SLOTS 12

/* One reason: its text with each number masked (the key), and each
 * number's range over the layouts it refused. */
typedef struct {
    char     key[256];
    uint64_t hash;
    int      n_slots;
    double   lo[MT__PLAN_REFUSAL_SLOTS], hi[MT__PLAN_REFUSAL_SLOTS];
    char     lo_text[MT__PLAN_REFUSAL_SLOTS][32], hi_text[MT__PLAN_REFUSAL_SLOTS][32];
    int      count;
    char     example[192];
    long long first;   /* the seq of the layout that met it first: the example's */
} mt__plan_refusal_group;

/* The tally of one search: at most MT_PLAN_MAX_REFUSALS groups, the last
 * of which takes every reason past them ("other reasons"). */
typedef struct {
    int                     n;
    mt__plan_refusal_group *g;   /* (MT_PLAN_MAX_REFUSALS), allocated at the first */
    /* the last reason added, word for word, and its group + 1 (0: none): a
       search refuses runs of layouts with one text (each schedule and
       option of a microbatch count that does not split), which count again
       without being parsed again */
    int                     last;
    char                    last_why[sizeof ((mt_plan_result *)0)->why];
} mt__plan_refusals;

/* Counts refused layout r (its why and its layout) in *t. MT_ENOMEM. */
mt_status mt__plan_refusals_add(mt__plan_refusals *t, const mt_plan_result *r);

/* The tally from (another thread's, of other layouts) merged into *into,
 * as one tally of both threads' layouts in the enumeration's order would
 * count them: a reason's count summed, its ranges widened, its example the
 * first met; the reasons past the first MT_PLAN_MAX_REFUSALS - 1 met
 * counted as "other reasons" (exact unless a thread's own tally had to:
 * then its "other" stays other). MT_ENOMEM. */
mt_status mt__plan_refusals_merge(mt__plan_refusals *into, const mt__plan_refusals *from);

/* The tally into rep->refusals (allocated; mt_plan_report_free frees it),
 * most layouts first, ties in the order first met. MT_ENOMEM. */
mt_status mt__plan_refusals_report(const mt__plan_refusals *t, mt_plan_report *rep);

/* Frees the tally and zeroes it; safe on a zeroed one. */
void mt__plan_refusals_free(mt__plan_refusals *t);

#endif /* MT_PLAN_REFUSALS_H */
