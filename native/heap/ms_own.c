#define _GNU_SOURCE
#include "ms_own.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ms_dump.h"

/* Ranges kept: a program that keeps more live mappings than this is counted in part (complete 0). */
#define MAX_RANGES 8192

typedef struct {
  uintptr_t lo, hi;
} range;

static range g_ranges[MAX_RANGES];
static int g_nranges, g_overflow;
static pthread_mutex_t g_own_lock = PTHREAD_MUTEX_INITIALIZER;
static void *g_allocator_base, *g_self_base;

/* Which object holds an address (its lowest mapped address), NULL for none (JIT code, anonymous
 * memory). Per mmap call: glibc's _dl_find_object (2.35) is a lookup in a sorted table, where dladdr
 * scans the object's symbol table for the nearest symbol, which node's 100,000 symbols made a fifth
 * of an explaining run's CPU time (determine_info <- _dl_addr under every V8 mmap). */
static void *base_of(const void *addr) {
  if (!addr) return NULL;
#ifdef DLFO_STRUCT_HAS_EH_DBASE
  struct dl_find_object found;
  return _dl_find_object((void *)addr, &found) == 0 ? found.dlfo_map_start : NULL;
#else
  Dl_info info;
  return dladdr(addr, &info) ? info.dli_fbase : NULL;
#endif
}

void ms_own_allocator(void *fn) {
  g_allocator_base = base_of(fn);
  g_self_base = base_of((void *)ms_own_allocator);
}

void ms_own_forked(void) { pthread_mutex_init(&g_own_lock, NULL); }

/* A call from the program, a runtime or a library, not from the allocator or from here. Before
 * libmsheap's constructor ran (another preload's constructor maps), the allocator is looked up. */
static int theirs(const void *ret) {
  static __thread int looking;
  if (!g_self_base) {
    if (looking) return 0;
    looking = 1;
    ms_own_allocator(dlsym(RTLD_NEXT, "malloc"));
    looking = 0;
  }
  void *base = base_of(ret);
  return !base || (base != g_allocator_base && base != g_self_base);
}

/* Under the lock: [lo, hi) is no longer kept (unmapped, or moved by mremap); a range cut in two
 * keeps both halves. */
static void forget(uintptr_t lo, uintptr_t hi) {
  for (int k = 0; k < g_nranges; k++) {
    range *r = &g_ranges[k];
    if (r->hi <= lo || r->lo >= hi) continue;
    if (r->lo < lo && r->hi > hi) { /* a hole in the middle */
      if (g_nranges == MAX_RANGES) {
        g_overflow = 1;
        r->hi = lo;
        continue;
      }
      g_ranges[g_nranges++] = (range){hi, r->hi};
      r->hi = lo;
    } else if (r->lo < lo) {
      r->hi = lo;
    } else if (r->hi > hi) {
      r->lo = hi;
    } else {
      g_ranges[k--] = g_ranges[--g_nranges];
    }
  }
}

static void keep(uintptr_t lo, uintptr_t hi) {
  if (g_nranges == MAX_RANGES) g_overflow = 1;
  else g_ranges[g_nranges++] = (range){lo, hi};
}

static uintptr_t page_end(uintptr_t addr, size_t len) {
  long page = sysconf(_SC_PAGESIZE);
  return (addr + len + (uintptr_t)page - 1) & ~((uintptr_t)page - 1);
}

/* The system calls themselves: glibc's wrappers add nothing on Linux, and no dlsym is needed
 * before the first call (an allocator may map memory before any constructor ran). */
static void *own_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off, const void *ret) {
  long p = syscall(SYS_mmap, addr, len, prot, flags, fd, off);
  if (p == -1) return MAP_FAILED;
  uintptr_t lo = (uintptr_t)p, hi = page_end(lo, len);
  int mine = (flags & MAP_ANONYMOUS) && (flags & MAP_PRIVATE) && theirs(ret);
  pthread_mutex_lock(&g_own_lock);
  if (flags & MAP_FIXED) forget(lo, hi); /* what it replaced is gone */
  if (mine) keep(lo, hi);
  pthread_mutex_unlock(&g_own_lock);
  return (void *)p;
}

MS_EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  return own_mmap(addr, len, prot, flags, fd, off, __builtin_return_address(0));
}

MS_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  return own_mmap(addr, len, prot, flags, fd, off, __builtin_return_address(0));
}

MS_EXPORT int munmap(void *addr, size_t len) {
  long rc = syscall(SYS_munmap, addr, len);
  if (rc == 0) {
    pthread_mutex_lock(&g_own_lock);
    forget((uintptr_t)addr, page_end((uintptr_t)addr, len));
    pthread_mutex_unlock(&g_own_lock);
  }
  return (int)rc;
}

MS_EXPORT void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...) {
  void *want = NULL;
  if (flags & MREMAP_FIXED) {
    va_list ap;
    va_start(ap, flags);
    want = va_arg(ap, void *);
    va_end(ap);
  }
  long p = syscall(SYS_mremap, old, old_len, new_len, flags, want);
  if (p == -1) return MAP_FAILED;
  uintptr_t lo = (uintptr_t)old, hi = page_end(lo, old_len);
  pthread_mutex_lock(&g_own_lock);
  int kept = 0; /* the old range was one of ours: the new one is too */
  for (int k = 0; k < g_nranges && !kept; k++) kept = g_ranges[k].lo < hi && g_ranges[k].hi > lo;
  if (!(flags & MREMAP_DONTUNMAP)) forget(lo, hi);
  if (flags & MREMAP_FIXED) forget((uintptr_t)p, page_end((uintptr_t)p, new_len));
  if (kept) keep((uintptr_t)p, page_end((uintptr_t)p, new_len));
  pthread_mutex_unlock(&g_own_lock);
  return (void *)p;
}

int64_t ms_own_resident_kb(int *ranges, int *complete) {
  static unsigned char vec[4096];
  long page = sysconf(_SC_PAGESIZE);
  int64_t pages = 0;
  pthread_mutex_lock(&g_own_lock);
  for (int k = 0; k < g_nranges; k++)
    for (uintptr_t at = g_ranges[k].lo; at < g_ranges[k].hi;) {
      uintptr_t n = (g_ranges[k].hi - at) / (uintptr_t)page;
      if (n > sizeof vec) n = sizeof vec;
      if (!n || mincore((void *)at, n * (uintptr_t)page, vec) != 0) break;
      for (uintptr_t i = 0; i < n; i++) pages += vec[i] & 1;
      at += n * (uintptr_t)page;
    }
  *ranges = g_nranges;
  *complete = !g_overflow;
  pthread_mutex_unlock(&g_own_lock);
  return pages * page / 1024;
}
