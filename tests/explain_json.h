/*
 * explain_json.h — `meshtrain explain --json`'s memory_per_device for the
 * planner's tests (a header of the tests, included by each): the binary
 * beside the test (ctest runs it from the build folder).
 */
#ifndef MT_TEST_EXPLAIN_JSON_H
#define MT_TEST_EXPLAIN_JSON_H

#include "harness.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* Runs `cmd` (an explain --json command line) and reads its
 * memory_per_device: parameters, gradients, optimizer, activations bytes
 * into out[4]; a failed run or no such line fails the test. */
static void explain_memory(const char *cmd, double out[4]) {
    FILE *f = popen(cmd, "r");
    MT_CHECK(f, "cannot run %s", cmd);
    char line[8192];
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        const char *at = strstr(line, "\"memory_per_device\"");
        if (!at || found) continue;
        found = sscanf(at, "\"memory_per_device\": {\"parameters\": %lf, \"gradients\": %lf, "
                       "\"optimizer\": %lf, \"activations\": %lf", &out[0], &out[1], &out[2],
                       &out[3]) == 4;
    }
    int rc = pclose(f);
    MT_CHECK(rc == 0 && found, "%s: exit %d, memory_per_device %s (run from the build folder "
             "with the meshtrain target built)", cmd, rc, found ? "read" : "not found");
}

#endif /* MT_TEST_EXPLAIN_JSON_H */
