/* A tiny JSON writer. Into a caller-owned fixed buffer (the probe must not call malloc: it runs
 * inside allocator benchmarks), or into a buffer that grows with realloc (ms-run, whose
 * document holds arbitrary program output and must never be cut short). */
#ifndef MS_JSON_H
#define MS_JSON_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
  char *buf;
  size_t cap, len;
  int need_comma; /* a value was written at this nesting level */
  int overflow;   /* fixed buffer: something did not fit (the text is cut there) */
  int growable;   /* buf is malloc'd and grows as needed */
} ms_json;

void msj_init(ms_json *j, char *buf, size_t cap);
/* A growable document; j->buf is malloc'd (free it); overflow is set only if realloc fails. */
int msj_init_growable(ms_json *j, size_t initial);
void msj_raw(ms_json *j, const char *s);
/* One line of the MEMSLEUTH_FD channel, in a fixed buffer: {"type": type, "pid": pid, ... (the
 * caller adds its members, msj_obj_end and the newline). */
void msj_line_begin(ms_json *j, char *buf, size_t cap, const char *type, int64_t pid);
void msj_obj_begin(ms_json *j, const char *key); /* key NULL for a top-level or array member */
void msj_obj_end(ms_json *j);
void msj_arr_begin(ms_json *j, const char *key);
void msj_arr_end(ms_json *j);
void msj_str(ms_json *j, const char *key, const char *val); /* val NULL writes null */
void msj_strn(ms_json *j, const char *key, const char *val, size_t n);
void msj_u64(ms_json *j, const char *key, uint64_t v);
void msj_i64(ms_json *j, const char *key, int64_t v);
void msj_dbl(ms_json *j, const char *key, double v);
void msj_bool(ms_json *j, const char *key, int v);
void msj_null(ms_json *j, const char *key);

/* Appends one document to the file `path` (created 0600, written O_APPEND) as one line of its
 * own: "\n", the text, "\n" in one writev. The per-process documents of a run (libmssites',
 * libmsheap's, ms-run's samplers') share one such file per kind, PREFIX.jsonl, instead of a file
 * each: creating a file cost 0.7-0.9 ms on this project's ext4 (the inode search), a document per
 * process of a tree. On a local file system the kernel holds the file's lock for a whole write, so
 * the documents of processes that end together never interleave; one cut short by a kill is followed by the next
 * one's leading newline, and a reader leaves out the line that does not parse. Returns 0 when
 * all was written, else -1 with errno. */
int msj_append_line(const char *path, const char *text, size_t len);
#endif
