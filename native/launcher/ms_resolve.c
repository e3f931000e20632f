#define _GNU_SOURCE
#include "ms_resolve.h"
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>

/* The object whose own definition `addr` is, or NULL. A non-PIE executable that takes malloc's
 * address carries a "canonical PLT entry": an undefined symbol with a value, so that &malloc is
 * one address everywhere. dlsym(RTLD_DEFAULT) finds that stub in the executable, yet every call
 * through it goes on to the real definition in a library; so a stub is not a definition. */
static const char *defined_in(void *addr) {
  Dl_info info;
  const ElfW(Sym) *sym = NULL;
  if (!addr || !dladdr1(addr, &info, (void **)&sym, RTLD_DL_SYMENT)) return NULL;
  if (!sym || sym->st_shndx == SHN_UNDEF) return NULL;
  return info.dli_fname ? info.dli_fname : "";
}

const char *ms_malloc_object(void) {
  const char *obj = defined_in(dlsym(RTLD_DEFAULT, "malloc"));
  if (obj && obj[0]) return obj;
  /* The stub case: walk the link map in load order (executable, preloads, then dependencies,
   * which is the global lookup order for the initial objects) to the first object that
   * defines malloc itself. dlsym on an object's handle searches it first, then its
   * dependencies, so the answer counts only when it lands in that very object. */
  void *self = dlopen(NULL, RTLD_LAZY | RTLD_NOLOAD);
  struct link_map *lm = NULL;
  if (!self || dlinfo(self, RTLD_DI_LINKMAP, &lm) != 0) return obj ? obj : "";
  for (; lm; lm = lm->l_next) {
    if (!lm->l_name || !lm->l_name[0]) continue; /* the executable itself, the vDSO */
    void *h = dlopen(lm->l_name, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) continue;
    const char *where = defined_in(dlsym(h, "malloc"));
    dlclose(h);
    if (where && strcmp(where, lm->l_name) == 0) return where;
  }
  return obj ? obj : "";
}
