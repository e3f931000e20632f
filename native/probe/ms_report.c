#include "ms_report.h"

void ms_json_unsupported(ms_json *j, const ms_counters *c) {
  char why[160];
  msj_obj_begin(j, "unsupported");
  for (int i = 0; i < c->n; i++)
    if (c->ev[i].fd < 0) msj_str(j, c->ev[i].def->name, ms_event_reason(&c->ev[i], why, sizeof why));
  msj_obj_end(j);
}

void ms_json_counters(ms_json *j, const ms_counters *c, const ms_snapshot *s0, const ms_snapshot *s1, int unsupported) {
  msj_obj_begin(j, "counters");
  for (int i = 0; i < c->n; i++) {
    const ms_event *e = &c->ev[i];
    if (e->def->kind == MS_KIND_SYSCALL || e->fd < 0) continue;
    double v;
    if (ms_scale(ms_reading_delta(s0->r[i], s1->r[i]), &v) == MS_NOT_COUNTED) msj_null(j, e->def->name);
    else msj_dbl(j, e->def->name, v);
  }
  msj_obj_end(j);
  msj_obj_begin(j, "syscalls");
  for (int i = 0; i < c->n; i++) {
    const ms_event *e = &c->ev[i];
    if (e->def->kind != MS_KIND_SYSCALL || e->fd < 0) continue;
    double v;
    ms_scale(ms_reading_delta(s0->r[i], s1->r[i]), &v);
    msj_u64(j, e->def->name, (uint64_t)(v + 0.5));
  }
  msj_obj_end(j);
  /* A fraction below 1 says the value is an estimate scaled for multiplexing. */
  msj_obj_begin(j, "running_fraction");
  for (int i = 0; i < c->n; i++) {
    if (c->ev[i].fd < 0) continue;
    ms_reading d = ms_reading_delta(s0->r[i], s1->r[i]);
    if (d.running_ns < d.enabled_ns) msj_dbl(j, c->ev[i].def->name, ms_running_fraction(d));
  }
  msj_obj_end(j);
  msj_arr_begin(j, "user_only"); /* events counted in user space only (perf_event_paranoid) */
  for (int i = 0; i < c->n; i++)
    if (c->ev[i].fd >= 0 && c->ev[i].user_only) msj_str(j, NULL, c->ev[i].def->name);
  msj_arr_end(j);
  if (unsupported) ms_json_unsupported(j, c);
}
