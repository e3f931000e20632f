/* Which object a process's calls to malloc bind to: the preload check (libmscheck.so). */
#ifndef MS_RESOLVE_H
#define MS_RESOLVE_H
/* The file name of the object whose own definition of malloc the program's calls reach, or ""
 * when none is found. Never allocates through malloc itself beyond what the dynamic linker does. */
const char *ms_malloc_object(void);
#endif
