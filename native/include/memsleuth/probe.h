/* memsleuth probe: measure a region of interest from inside your program.
 *
 *   #include <memsleuth/probe.h>
 *   ms_region_begin("copy");
 *   memcpy(dst, src, n);
 *   ms_region_end(n);            // ops: how many operations the region did (bytes, iterations)
 *
 * Link with -lmsprobe. Each region reads perf counters (page faults, context switches, task
 * clock, syscalls by name from tracepoints, hardware counters where a PMU exists), the clock and
 * getrusage at its borders. Under `memsleuth` (MEMSLEUTH_FD set) each region is one JSON line on
 * that fd; on its own the probe prints a readable summary to stderr at exit.
 *
 * Regions nest (up to 8 deep). Begin and end a region from the same thread; counters include
 * threads created after the probe started (it starts when the library loads). */
#ifndef MEMSLEUTH_PROBE_H
#define MEMSLEUTH_PROBE_H
#include <stdint.h>
#ifdef __cplusplus
extern "C" {
#endif

void ms_region_begin(const char *name);
void ms_region_end(uint64_t ops);
/* Starts the counters now if they are not started yet (the library does it at load). */
void ms_probe_init(void);
/* The program's result: one JSON object (no newline inside), printed on stdout and, under
 * memsleuth, passed on its own channel (MEMSLEUTH_FD) so that no output of the program can
 * hide or fake it. Call it once, at the end. */
void ms_result(const char *json_object);

#ifdef __cplusplus
}
/* RAII helper: the region ends when the object goes out of scope. */
namespace memsleuth {
class Region {
 public:
  explicit Region(const char *name, uint64_t ops = 0) : ops_(ops) { ms_region_begin(name); }
  ~Region() { ms_region_end(ops_); }
  void set_ops(uint64_t ops) { ops_ = ops; }
  Region(const Region &) = delete;
  Region &operator=(const Region &) = delete;

 private:
  uint64_t ops_;
};
}  // namespace memsleuth
#endif
#endif
