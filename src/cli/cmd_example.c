/*
 * cmd_example.c — `meshtrain example linreg`: the pmap linear-regression
 * example of the JAX docs (mt_example_linreg), printing the loss of every
 * step and the learned parameters.
 *
 * The loss lines ("step   3  loss 1.234567e+00") are the output scripts
 * compare: every mesh, and every mpirun, must print the same numbers as one
 * device. Under mpirun every rank runs the same training, so only rank 0
 * prints; the rank comes from the launcher's environment (mt_launcher_world)
 * because it is needed outside the launch, where no mt_ctx exists.
 */
#include "cli/args.h"
#include "cli/files.h"
#include "meshtrain.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char EXAMPLE_USAGE[] =
    "usage: meshtrain example linreg [flags]\n"
    "\n"
    "Linear regression trained with pmap, as in the JAX docs: 3 features,\n"
    "parameters replicated, the global batch split over a 'data' axis of\n"
    "--devices devices, pmean of loss and gradients, SGD. Prints the loss of\n"
    "every step (the same on every mesh) and the learned parameters.\n"
    "\n"
    "examples:\n"
    "  meshtrain example linreg --devices 4 --steps 20\n"
    "  mpirun -np 2 meshtrain example linreg --trace linreg.json\n";

int cli_cmd_example(int argc, char **argv) {
    mt_linreg_example_opts o;
    memset(&o, 0, sizeof o);
    o.devices = 0;
    o.steps = 20;
    o.batch = 128;
    o.lr = 0.1f;
    o.seed = 1337;
    int transport = 0;   /* index into EXAMPLE_TRANSPORTS */
    const double INF = HUGE_VAL;
    const cli_opt opts[] = {
        {"devices", CLI_INT, &o.devices, 0, CLI_MAX_THREAD_DEVICES, 0, 0, NULL, "N",
         "devices on the 'data' axis (0: the MPI world size under mpirun, else 1)"},
        {"steps", CLI_INT, &o.steps, 1, 1e7, 0, 0, NULL, "N", "SGD steps"},
        {"batch", CLI_INT, &o.batch, 1, 1 << 24, 0, 0, NULL, "N",
         "global batch (examples per step), divisible by the devices"},
        {"lr", CLI_FLOAT, &o.lr, 0, INF, 1, 1, NULL, "X", "learning rate"},
        {"seed", CLI_U64, &o.seed, 0, 0, 0, 0, NULL, "N", "data seed"},
        {"transport", CLI_CHOICE, &transport, 0, 0, 0, 0, "auto|threads|mpi", "NAME",
         "threads of this process, or one device per MPI rank (auto: mpi under mpirun)"},
        {"trace", CLI_STR, &o.trace, 0, 0, 0, 0, NULL, "FILE",
         "write a Chrome/Perfetto trace of every device here"},
        {NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL},
    };
    int rc;
    if (!cli_parse_named("example", "linreg", "example", EXAMPLE_USAGE,
                         opts, argc, argv, &rc))
        return rc;
    static const mt_transport_kind kinds[] = {MT_TRANSPORT_AUTO, MT_TRANSPORT_THREADS,
                                              MT_TRANSPORT_MPI};
    o.transport = kinds[transport];
    int rank;
    mt_launcher_world(&rank, NULL);
    /* 0 devices means "the world size" to the library, and only the mpi
     * transport has one: on threads it is one device. */
    const bool on_mpi = mt_transport_resolve(o.transport) == MT_TRANSPORT_MPI;
    if (o.devices == 0 && !on_mpi) o.devices = 1;
    if (o.devices > 0 && o.batch % o.devices != 0) {
        cli_error("--batch %d does not divide over --devices %d; use a multiple of %d", o.batch,
                  o.devices, o.devices);
        return CLI_EXIT_USAGE;
    }

    /* the trace is written after the run: a path that cannot take it fails now
     * (under mpirun by stat only: every rank checks it at once) */
    const cli_file files[] = {
        {.flag = "trace", .path = o.trace, .role = CLI_FILE_SAVE, .stat_only = on_mpi}};
    if ((rc = cli_check_files(files, 1)) != CLI_EXIT_OK) return rc;

    float *losses = calloc((size_t)o.steps, sizeof *losses);
    if (!losses) {
        cli_error("cannot allocate %d losses", o.steps);
        return CLI_EXIT_FAIL;
    }
    float params[4] = {0};
    mt_status st = mt_example_linreg(&o, losses, params);
    const bool printer = rank == 0;
    if (st != MT_OK) {
        if (printer) cli_error("%s", mt_errmsg()[0] ? mt_errmsg() : mt_status_text(st));
        free(losses);
        return cli_exit_of(st);
    }
    if (printer) {
        for (int s = 0; s < o.steps; s++)
            printf("step %3d  loss %.6e\n", s + 1, (double)losses[s]);
        printf("params  w = [%.6f, %.6f, %.6f]  b = %.6f  (true: w = [2, -3.4, 1.7], b = 4.2)\n",
               (double)params[0], (double)params[1], (double)params[2], (double)params[3]);
        if (o.trace) printf("trace   %s (open in https://ui.perfetto.dev)\n", o.trace);
    }
    free(losses);
    return CLI_EXIT_OK;
}
