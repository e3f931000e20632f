/* What the explaining-run libraries (libmsheap, libmssites) write at exit: JSON strings and the
 * process's executable mappings, so that sampled return addresses can be named after the process
 * is gone (src/memsleuth/symbols.py). */
#ifndef MS_DUMP_H
#define MS_DUMP_H
#include <stdio.h>

/* A JSON string: quotes, backslashes and control characters escaped. */
void ms_dump_json_str(FILE *f, const char *s);
/* ,"maps":[[lo,hi,file offset,"path"],...] of the executable file mappings. */
void ms_dump_maps(FILE *f);
/* Opens <dir>/<prefix>-<pid>.json.tmp for writing; ms_dump_close renames it into place (a reader
 * never sees half a document). Returns NULL when it cannot be created. */
FILE *ms_dump_open(const char *dir, const char *prefix, char *path, int pathlen);
void ms_dump_close(FILE *f, const char *path);
#endif
