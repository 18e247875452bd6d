/*
 * plan/plan_impl.h — what the plan layer's files share.
 */
#ifndef MT_PLAN_IMPL_H
#define MT_PLAN_IMPL_H

#include "meshtrain/plan.h"

/* The "format" string of the hardware descriptions this reader knows. */
#define MT__HARDWARE_FORMAT "meshtrain-hardware-1"

/* Reads the machine file at `path` (meshtrain/profile.h) into *hw, mapped as
 * mt_hardware_load says. Fails as mt_machine_read does. */
mt_status mt__hardware_from_machine(const char *path, mt_hardware *hw);

#endif /* MT_PLAN_IMPL_H */
