/* Shared by libmsheap and libmssites: see ms_dump.h. */
#define _GNU_SOURCE
#include "ms_dump.h"

#include <stdio.h>
#include <string.h>
#include <unistd.h>

void ms_dump_json_str(FILE *f, const char *s) {
  fputc('"', f);
  for (; *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
    else if (c < 0x20) fprintf(f, "\\u%04x", c);
    else fputc(c, f);
  }
  fputc('"', f);
}

void ms_dump_maps(FILE *f) {
  FILE *m = fopen("/proc/self/maps", "re");
  fputs(",\"maps\":[", f);
  if (m) {
    char line[1024];
    int first = 1;
    while (fgets(line, sizeof line, m)) {
      unsigned long lo, hi, off;
      char perms[8], path[900];
      path[0] = 0;
      if (sscanf(line, "%lx-%lx %7s %lx %*s %*s %899[^\n]", &lo, &hi, perms, &off, path) >= 4 && perms[2] == 'x' &&
          path[0] == '/') {
        fprintf(f, "%s[%lu,%lu,%lu,", first ? "" : ",", lo, hi, off);
        ms_dump_json_str(f, path);
        fputc(']', f);
        first = 0;
      }
    }
    fclose(m);
  }
  fputc(']', f);
}

FILE *ms_dump_open(const char *dir, const char *prefix, char *path, int pathlen) {
  char tmp[4400];
  snprintf(path, (size_t)pathlen, "%s/%s-%d.json", dir, prefix, (int)getpid());
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  return fopen(tmp, "we");
}

void ms_dump_close(FILE *f, const char *path) {
  char tmp[4400];
  fclose(f);
  snprintf(tmp, sizeof tmp, "%s.tmp", path);
  rename(tmp, path);
}
