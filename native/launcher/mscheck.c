/* libmscheck.so: the preload check. ms-run's check-only run (`ms-run --preload-check`) preloads
 * it after the allocator under test into the very command to be measured. Its constructor asks
 * the dynamic linker which object the program's `malloc` binds to (ms_resolve.c), writes that as
 * one JSON line to MEMSLEUTH_FD, and ends the process before the program's own code runs: the
 * measured runs never carry this library, so it leaves no trace in their figures. */
#define _GNU_SOURCE
#include <stdlib.h>
#include <unistd.h>
#include "ms_json.h"
#include "ms_resolve.h"

__attribute__((constructor)) static void mscheck_report(void) {
  const char *fd = getenv("MEMSLEUTH_FD");
  if (!fd || !getenv("MEMSLEUTH_PRELOAD_CHECK")) return;
  char buf[8192];
  ms_json j;
  msj_line_begin(&j, buf, sizeof buf, "malloc-resolve", getpid());
  msj_str(&j, "object", ms_malloc_object());
  msj_obj_end(&j);
  msj_raw(&j, "\n");
  if (!j.overflow) (void)!write(atoi(fd), buf, j.len);
  _exit(0);
}
