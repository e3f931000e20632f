/* libmscheck.so: preloaded by ms-run after the allocator under test. Its constructor asks the
 * dynamic linker which object the program's `malloc` binds to (global lookup order, the same
 * one the program's own calls use) and writes it as one JSON line to MEMSLEUTH_FD. ms-run
 * compares it with the allocator it was asked to load: a mismatch is `preload-failed`. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((constructor)) static void mscheck_report(void) {
  const char *fd = getenv("MEMSLEUTH_FD");
  /* Only the first program exec'd under ms-run reports; its own children inherit LD_PRELOAD. */
  if (!fd || !getenv("MEMSLEUTH_CHECK_MALLOC")) return;
  unsetenv("MEMSLEUTH_CHECK_MALLOC");
  void *sym = dlsym(RTLD_DEFAULT, "malloc");
  Dl_info info;
  memset(&info, 0, sizeof info);
  const char *obj = (sym && dladdr(sym, &info) && info.dli_fname) ? info.dli_fname : "";
  char buf[4200];
  char esc[4096];
  size_t k = 0;
  for (const char *p = obj; *p && k + 2 < sizeof esc; p++) {
    if (*p == '"' || *p == '\\') esc[k++] = '\\';
    esc[k++] = *p;
  }
  esc[k] = 0;
  int n = snprintf(buf, sizeof buf, "{\"type\":\"malloc-resolve\",\"pid\":%d,\"object\":\"%s\"}\n", (int)getpid(), esc);
  if (n > 0) (void)!write(atoi(fd), buf, (size_t)n);
}
