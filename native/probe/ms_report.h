/* The counters of an interval as JSON: one writer shared by the probe (a region) and ms-run
 * (the whole process), so the two documents always agree on names and on what is reported. */
#ifndef MS_REPORT_H
#define MS_REPORT_H
#include "ms_events.h"
#include "ms_json.h"

/* Writes "counters" (software and hardware: a value, or null when never scheduled), "syscalls"
 * (counts by name), "running_fraction" (only events that were multiplexed: running < enabled)
 * and, with `unsupported` set, "unsupported" (name -> reason for each event that did not open). */
void ms_json_counters(ms_json *j, const ms_counters *c, const ms_snapshot *s0, const ms_snapshot *s1, int unsupported);
/* Only "unsupported": the probe writes it once per process, not per region. */
void ms_json_unsupported(ms_json *j, const ms_counters *c);
#endif
