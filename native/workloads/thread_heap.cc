// thread-heap: seed 002's std::vector in a function called by every thread, against processes.
//
//   thread-heap --threads=T --calls=C --elems=E --form=F --mode=M
//
// Each of T workers calls f() C times; f() fills a std::vector<int> with E elements by
// push_back (so it grows by reallocation, as the seed's pair list did) and returns one element.
// Forms of the vector:
//   local         a function-local std::vector: allocated and freed on every call;
//   thread_local  `thread_local std::vector`, cleared and reused (the seed's one-line fix);
//   static        a static array of vectors indexed by the worker (per-thread indexing).
// Modes: threads (T threads of one process) or processes (T forked processes: the flat-MPI
// analogue). Region "main" spans starting the workers to joining them (ops = T x C); the
// probe's counters are inherited by the threads and the processes.
//
// The workload counts nothing about its heap: its arenas and live bytes are read by memsleuth's
// heap accounting (libmsheap, preloaded in the explaining run), per process, as for any program.
//
// Result (one JSON line on stdout): the checksum (depends only on the parameters). A worker
// process that dies by a signal is re-raised in the parent, so the run is recorded as that crash.
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <thread>
#include <vector>

#include "memsleuth/probe.h"
extern "C" {
#include "ms_args.h"
}

namespace {

constexpr int kMaxWorkers = 256;
enum Form { LOCAL, THREAD_LOCAL, STATIC };
enum Mode { THREADS, PROCESSES };
const char *const kForms[] = {"local", "thread_local", "static", nullptr};
const char *const kModes[] = {"threads", "processes", nullptr};

thread_local std::vector<int> tl_vec;
std::vector<int> static_vecs[kMaxWorkers];

// noinline: each call is a real call with its own vector, as in the seed's code.
__attribute__((noinline)) uint64_t fill(std::vector<int> &v, uint64_t elems, uint64_t salt) {
  for (uint64_t i = 0; i < elems; i++) v.push_back(static_cast<int>(i ^ salt));
  return static_cast<uint64_t>(v[elems / 2]) + v.size();
}

__attribute__((noinline)) uint64_t call(Form form, int worker, uint64_t elems, uint64_t salt) {
  switch (form) {
    case LOCAL: {
      std::vector<int> v;
      return fill(v, elems, salt);
    }
    case THREAD_LOCAL:
      tl_vec.clear();
      return fill(tl_vec, elems, salt);
    default:
      static_vecs[worker].clear();
      return fill(static_vecs[worker], elems, salt);
  }
}

uint64_t work(Form form, int worker, uint64_t calls, uint64_t elems) {
  uint64_t sum = 0;
  for (uint64_t c = 0; c < calls; c++) sum += call(form, worker, elems, c & 0xff);
  return sum;
}

struct Shared {  // written by forked workers, read by the parent (MAP_SHARED)
  uint64_t checksum[kMaxWorkers];
};

}  // namespace

int main(int argc, char **argv) {
  uint64_t threads = 2, calls = 20000, elems = 4096;
  int form = LOCAL, mode = THREADS;
  const ms_opt opts[] = {MS_U64("threads", &threads, 1, kMaxWorkers, "workers"),
                         MS_U64("calls", &calls, 1, UINT64_C(1) << 40, "calls each worker makes"),
                         MS_U64("elems", &elems, 1, UINT64_C(1) << 28, "elements of each call's vector"),
                         MS_CHOICE("form", &form, kForms, "where the vector lives"),
                         MS_CHOICE("mode", &mode, kModes, "threads or processes"),
                         MS_END};
  ms_parse("thread-heap", "seed 002: a vector per call in threads or processes", opts, argc, argv);
  const int n = static_cast<int>(threads);
  auto *shared =
      static_cast<Shared *>(mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
  if (shared == MAP_FAILED) {
    perror("thread-heap: mmap");
    return 3;
  }

  ms_region_begin("main");
  if (mode == THREADS) {
    std::vector<std::thread> ts;
    for (int w = 0; w < n; w++)
      ts.emplace_back([=] { shared->checksum[w] = work(static_cast<Form>(form), w, calls, elems); });
    for (auto &t : ts) t.join();
  } else {
    pid_t pids[kMaxWorkers];
    for (int w = 0; w < n; w++) {
      pids[w] = fork();
      if (pids[w] < 0) {
        perror("thread-heap: fork");
        return 5;
      }
      if (pids[w] == 0) {
        shared->checksum[w] = work(static_cast<Form>(form), w, calls, elems);
        _exit(0);  // no atexit handlers: the parent reports
      }
    }
    for (int w = 0; w < n; w++) {
      int st = 0;
      while (waitpid(pids[w], &st, 0) < 0) {}
      if (WIFSIGNALED(st)) {
        signal(WTERMSIG(st), SIG_DFL);
        raise(WTERMSIG(st));
      }
      if (!WIFEXITED(st) || WEXITSTATUS(st)) {
        fprintf(stderr, "thread-heap: worker process %d exited with status %d\n", w, WEXITSTATUS(st));
        return 5;
      }
    }
  }
  ms_region_end(threads * calls);

  uint64_t checksum = 0;
  for (int w = 0; w < n; w++) checksum += shared->checksum[w];
  char result[256];
  snprintf(result, sizeof result,
           "{\"workload\":\"thread-heap\",\"form\":\"%s\",\"mode\":\"%s\",\"threads\":%d,\"checksum\":%llu}",
           kForms[form], kModes[mode], n, static_cast<unsigned long long>(checksum));
  ms_result(result);
  return 0;
}
