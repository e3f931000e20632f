/* Argument parsing shared by the workloads: every parameter is --name=value, and a bad value is
 * one line on stderr and exit 2 (memsleuth validates first; this guards direct use). */
#ifndef MS_ARGS_H
#define MS_ARGS_H
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of --name=VALUE, or NULL when arg is some other option. */
static inline const char *ms_arg_value(const char *arg, const char *name) {
  size_t n = strlen(name);
  if (strncmp(arg, "--", 2) || strncmp(arg + 2, name, n) || arg[2 + n] != '=') return NULL;
  return arg + 3 + n;
}

static inline int ms_arg_u64(const char *prog, const char *arg, const char *name, uint64_t *out, uint64_t lo,
                             uint64_t hi) {
  const char *v = ms_arg_value(arg, name);
  if (!v) return 0;
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (errno || end == v || *end || *v == '-' || x < lo || x > hi) {
    fprintf(stderr, "%s: --%s must be an integer in [%" PRIu64 ", %" PRIu64 "], got '%s'\n", prog, name, lo, hi, v);
    exit(2);
  }
  *out = x;
  return 1;
}

/* --name=one-of-choices: *out is the index in choices (a NULL-terminated list). */
static inline int ms_arg_choice(const char *prog, const char *arg, const char *name, const char *const *choices,
                                int *out) {
  const char *v = ms_arg_value(arg, name);
  if (!v) return 0;
  for (int i = 0; choices[i]; i++)
    if (!strcmp(v, choices[i])) { *out = i; return 1; }
  fprintf(stderr, "%s: --%s must be one of", prog, name);
  for (int i = 0; choices[i]; i++) fprintf(stderr, " %s", choices[i]);
  fprintf(stderr, ", got '%s'\n", v);
  exit(2);
}
#endif
