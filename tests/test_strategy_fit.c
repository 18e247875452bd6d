/*
 * test_strategy_fit.c — mt__strategy_misfits (train/strategy_fit.h), the
 * one statement of what ZeRO, sequence parallelism and collective matmul
 * ask of a mesh's sizes, which mt_train_config_check and the planner's
 * layouts both read: each row's misfits worked out by hand from the
 * trainer's rules (ZeRO needs a data axis of 2 or more, ZeRO-1 no fsdp
 * axis beside it, sequence parallelism a tensor axis of 2 or more that
 * divides T, collective matmul sequence parallelism). Then the trainer's
 * check refuses the same configurations, naming the misfit.
 */
#include "harness.h"
#include "meshtrain.h"
#include "train/strategy_fit.h"

#include <string.h>

enum {
    CM = MT__MISFIT_CM_NO_SP,
    NODATA = MT__MISFIT_ZERO_NO_DATA,
    Z1FSDP = MT__MISFIT_ZERO1_FSDP,
    NOTENSOR = MT__MISFIT_SP_NO_TENSOR,
    SPT = MT__MISFIT_SP_T,
};

MT_TEST(misfits_by_hand) {
    static const struct {
        mt__strategy_sizes z;
        unsigned want;
    } rows[] = {
        /* data fsdp tensor T zero sp cm */
        {{1, 1, 1, 64, 0, false, false}, 0},
        {{2, 1, 1, 64, 1, false, false}, 0},
        {{1, 1, 1, 64, 1, false, false}, NODATA},
        {{0, 2, 1, 64, 3, false, false}, NODATA},          /* no data axis at all */
        {{2, 2, 1, 64, 1, false, false}, Z1FSDP},
        {{1, 2, 1, 64, 1, false, false}, NODATA | Z1FSDP},
        {{2, 2, 1, 64, 2, false, false}, 0},               /* ZeRO-2 and 3 beside fsdp */
        {{2, 2, 1, 64, 3, false, false}, 0},
        {{1, 1, 2, 64, 0, true, false}, 0},
        {{1, 1, 2, 64, 0, true, true}, 0},
        {{1, 1, 1, 64, 0, true, false}, NOTENSOR},
        {{1, 1, 0, 64, 0, true, false}, NOTENSOR},        /* no tensor axis at all */
        {{1, 1, 3, 8, 0, true, false}, SPT},               /* 8 tokens over 3 */
        {{1, 1, 4, 10, 0, true, true}, SPT},               /* 10 over 4 */
        {{1, 1, 4, 12, 0, false, false}, 0},               /* T is sp's only */
        {{1, 1, 2, 64, 0, false, true}, CM},
        {{1, 2, 1, 7, 1, false, true}, CM | NODATA | Z1FSDP},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) {
        unsigned got = mt__strategy_misfits(&rows[i].z);
        MT_CHECK(got == rows[i].want, "row %zu: misfits 0x%x, want 0x%x", i, got, rows[i].want);
    }
}

/* A small GPT (T=16) on `mesh` with the settings given: the trainer's check. */
static mt_status check(const char *mesh, int zero, bool sp, int cm) {
    mt_train_config c = mt_train_defaults();
    c.data = NULL;
    c.model = MT_MODEL_MLP;
    c.B = 8;
    c.T = 16;
    c.mesh = mesh;
    c.zero = zero;
    c.sequence_parallel = sp;
    c.collective_matmul = cm;
    if (sp || cm) {   /* sequence parallelism needs a sequence model */
        static mt_gpt_config g = {.L = 1, .C = 16, .NH = 2, .maxT = 16, .V = 64, .Vp = 64};
        c.model = MT_MODEL_GPT;
        c.model_config = &g;
        c.model_config_size = sizeof g;
        c.data = "(no data)";
    }
    return mt_train_config_check(&c);
}

MT_TEST(the_trainer_refuses_each) {
    MT_CHECK_OK(check("data=2", 1, false, 0));
    MT_CHECK_FAILS(check("tensor=2", 1, false, 0), MT_EINVAL, "zero=1 splits the parameters");
    MT_CHECK_FAILS(check("data=2,fsdp=2", 1, false, 0), MT_EINVAL, "zero=1 with an fsdp axis");
    MT_CHECK_OK(check("tensor=2", 0, true, 1));
    MT_CHECK_FAILS(check("data=2", 0, true, 0), MT_EINVAL, "no tensor axis of 2 or more");
    MT_CHECK_FAILS(check("tensor=3", 0, true, 0), MT_EINVAL, "splits T=16", "tensor=3");
    MT_CHECK_FAILS(check("tensor=2", 0, false, 1), MT_EINVAL,
                   "--collective-matmul moves the collectives");
}

int main(int argc, char **argv) { return mt_test_main(argc, argv); }
