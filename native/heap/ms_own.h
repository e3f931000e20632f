/* The anonymous memory a process maps itself, outside its allocator (libmsheap): the program's
 * own mmap pools and buffers, a runtime's collected heap, an interpreter's object arenas, a JIT's
 * code. libmsheap interposes mmap, munmap and mremap and keeps the private anonymous ranges mapped
 * by any caller but the allocator's object (the one that serves malloc) and libmsheap itself; at a
 * snapshot their resident size is read with mincore. glibc's malloc maps through its own internal
 * calls, which no preload sees; another allocator's calls come from its own object and are left
 * out. So what is resident in these ranges is not malloc's, neither live blocks nor overhead. */
#ifndef MS_OWN_H
#define MS_OWN_H
#include <stdint.h>

/* The allocator: any function of the object that serves malloc (its mappings are not the program's). */
void ms_own_allocator(void *fn);
/* A forked child: the lock may have been held by a thread the child does not have. */
void ms_own_forked(void);
/* Resident KiB of the ranges kept, and how many ranges; `complete` 0 when the table overflowed
 * (the figure is then a lower bound). */
int64_t ms_own_resident_kb(int *ranges, int *complete);
#endif
