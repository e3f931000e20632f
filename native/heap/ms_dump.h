/* What the explaining-run libraries (libmsheap, libmssites) write at exit: JSON strings and the
 * process's executable mappings, so that sampled return addresses can be named after the process
 * is gone (src/memsleuth/symbols.py). */
#ifndef MS_DUMP_H
#define MS_DUMP_H
#include <signal.h>
#include <stdint.h>
#include <stdio.h>

/* Both libraries are built with hidden visibility (CMakeLists.txt): preloaded together, each keeps
 * its own copy of these helpers and of its state. Before, libmssites' calls bound to libmsheap's
 * copies, the second registration replaced the first, and one document was never written. Only
 * what a library interposes (malloc and the rest, _exit, _Exit) is exported. */
#define MS_EXPORT __attribute__((visibility("default")))

/* fopen with the stream's buffer given (setvbuf), so that stdio takes none from the program's
 * allocator: a buffer of 1 KiB or more is a large-bin request, and glibc consolidates its fast bins
 * first. A Perl child that freed its hash left millions of fast-bin chunks that it would never have
 * merged; the report's buffer merged them all, and the explaining run spent 4x as long in
 * malloc_consolidate as the program does. Only the FILE itself (under 500 bytes) still comes from
 * malloc. `buf` must live until fclose. */
FILE *ms_dump_fopen(const char *path, const char *mode, char *buf, size_t size);
/* A JSON string: quotes, backslashes and control characters escaped. */
void ms_dump_json_str(FILE *f, const char *s);
/* ,"maps":[[lo,hi,file offset,"path"],...] of the executable file mappings, read from
 * /proc/self/maps where `needed` (the document names addresses), else none: most processes of a
 * tree take no sample, and reading their maps was 0.08 of the sampler's 0.51 ms a process that took
 * none (300 x /bin/true, 9 interleaved rounds). */
void ms_dump_maps(FILE *f, int needed);
/* A process's document is written to memory (pages mapped for it, not the program's allocator;
 * buffered in `buf`, as ms_dump_fopen) by ms_dump_open, then appended whole to <dir>/<prefix>.jsonl
 * as one line by ms_dump_close (msj_append_line: one file per kind for the whole run, so no file is
 * created per process). The document must hold no newline (ms_dump_json_str escapes them in
 * strings). ms_dump_open returns NULL when the stream cannot be made. */
typedef struct {
  char *text;
  size_t len, cap;
  int failed; /* a page could not be mapped: the document is not written */
} ms_doc;
FILE *ms_dump_open(ms_doc *doc, char *buf, size_t size);
void ms_dump_close(FILE *f, ms_doc *doc, const char *dir, const char *prefix);
/* Writes the library's document once per process: `report` runs at exit (atexit) and at _exit or
 * _Exit (a forked worker, Python's os._exit; this object interposes them), never in a vfork child
 * (another pid than the account's, sharing its parent's memory). Call at start and, with the new
 * pid, in a forked child (ms_dump_forked). */
void ms_dump_at_exit(void (*report)(void));
void ms_dump_forked(void);
/* Blocks SIGTRAP for the library's own work (a forked child's reset, a snapshot, the report), so
 * that the in-program sampler (libmssites) never takes a stack of it: a perf SIGTRAP that arrives
 * blocked is delivered late, marked asynchronous, and left out. */
void ms_dump_quiet(sigset_t *old);
void ms_dump_loud(const sigset_t *old);
/* A stack as return addresses, innermost first (`max` at most): the C runtime's unwinder (.eh_frame,
 * so no frame pointers are needed), from the signal-interrupted `pc` on when it is not 0 (stored
 * + 1, like a return address), else from the caller. Where it stops at code that has no unwind
 * information (a runtime's compiled code: V8's JIT and builtins, the JVM's, CPython's perf
 * trampolines), the stack goes on by frame pointers, each read without risk of a fault, while
 * every caller's frame lies above its callee's within 1 MiB. `pc_fp`: the frame pointer at `pc`,
 * for when the unwinder cannot cross the signal frame. Returns the number of frames. */
int ms_unwind(uintptr_t *frames, int max, uintptr_t pc, uintptr_t pc_fp);
#endif
