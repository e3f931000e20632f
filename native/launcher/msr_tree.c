/* The measured command's process tree, found from /proc. ms-run is a child subreaper, so a
 * process the command starts stays below ms-run even when its parent exits or it calls setsid. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "msr.h"

uint64_t msr_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static ssize_t read_small(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n < 0) return -1;
  buf[n] = 0;
  return n;
}

int64_t msr_machine_tasks(void) {
  FILE *f = fopen("/proc/stat", "re");
  if (!f) return -1;
  char *line = NULL;
  size_t cap = 0;
  int64_t n = -1;
  while (getline(&line, &cap, f) > 0) /* the `intr` line before it can be long */
    if (!strncmp(line, "processes ", 10)) {
      n = strtoll(line + 10, NULL, 10);
      break;
    }
  free(line);
  fclose(f);
  return n;
}

/* ppid and state from a stat file (/proc/PID/stat, or a thread's), and where `flt` is not NULL
 * the faults: minor and major, each the process's own (its threads', the ended ones' too) plus
 * those of the children it has waited for. The command name may hold spaces and parentheses, so
 * the fields are read after the last ')'. */
static int stat_at(const char *path, pid_t *ppid, char *state, uint64_t *flt) {
  char buf[1024];
  if (read_small(path, buf, sizeof buf) <= 0) return -1;
  char *rp = strrchr(buf, ')');
  int pp = 0;
  unsigned long long mn = 0, cmn = 0, mj = 0, cmj = 0;
  int got = rp ? sscanf(rp + 1, " %c %d %*d %*d %*d %*d %*u %llu %llu %llu %llu", state, &pp, &mn, &cmn, &mj, &cmj) : 0;
  if (got < 2) return -1;
  *ppid = (pid_t)pp;
  if (flt) {
    flt[0] = got == 6 ? mn + cmn : 0;
    flt[1] = got == 6 ? mj + cmj : 0;
  }
  return 0;
}

static int stat_of(pid_t pid, pid_t *ppid, char *state, uint64_t *flt) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  return stat_at(path, ppid, state, flt);
}

static int dead(char state) { return state == 'Z' || state == 'X'; }

pid_t msr_live_task(pid_t pid) {
  pid_t pp;
  char st;
  if (stat_of(pid, &pp, &st, NULL)) return 0;
  if (!dead(st)) return pid;
  /* The main thread has exited (pthread_exit) or the process has: a live thread says which. */
  char path[96];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  if (!d) return 0;
  pid_t found = 0;
  struct dirent *e;
  while (!found && (e = readdir(d))) {
    pid_t tid = (pid_t)atoi(e->d_name);
    if (tid <= 0 || tid == pid) continue;
    snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
    if (stat_at(path, &pp, &st, NULL) == 0 && !dead(st)) found = tid;
  }
  closedir(d);
  return found;
}

void msr_proc_file(pid_t pid, const char *name, char *path, size_t cap) {
  pid_t t = msr_live_task(pid);
  if (t > 0 && t != pid) snprintf(path, cap, "/proc/%d/task/%d/%s", (int)pid, (int)t, name);
  else snprintf(path, cap, "/proc/%d/%s", (int)pid, name);
}

/* A process that runs: its main thread does, or another of its threads (a zombie main thread).
 * Returns the task whose files to read (the process, or that thread), else 0. */
static pid_t alive(pid_t pid, char state) {
  if (!dead(state)) return pid;
  return state == 'Z' ? msr_live_task(pid) : 0;
}

/* /proc/PID/NAME of a listed process, or its live thread's. */
static void listed_file(const msr_procs *p, int i, const char *name, char *path, size_t cap) {
  pid_t t = p->task[i];
  if (t > 0 && t != p->pid[i]) snprintf(path, cap, "/proc/%d/task/%d/%s", (int)p->pid[i], (int)t, name);
  else snprintf(path, cap, "/proc/%d/%s", (int)p->pid[i], name);
}

void msr_descendants(msr_procs *out) {
  pid_t self = getpid();
  msr_tree_of(&self, 1, 0, out);
}

/* The pids listed in DIR/cgroup.procs and in its cgroups below (a nested ms-run makes its own). */
static void cgroup_members(const char *dir, int depth, msr_procs *out) {
  char path[8448];
  snprintf(path, sizeof path, "%s/cgroup.procs", dir);
  FILE *f = fopen(path, "re");
  if (f) {
    long p;
    while (out->n < MSR_MAX_PROCS && fscanf(f, "%ld", &p) == 1) out->pid[out->n++] = (pid_t)p;
    fclose(f);
  }
  DIR *d = depth < 8 ? opendir(dir) : NULL;
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_type == DT_DIR && e->d_name[0] != '.') {
      snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
      cgroup_members(path, depth + 1, out);
    }
  closedir(d);
}

static int by_pid(const void *a, const void *b) {
  pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
  return (x > y) - (x < y);
}

void msr_tree_in_cgroup(const char *dir, msr_procs *out) {
  static pid_t all[MSR_MAX_PROCS];
  out->n = 0;
  cgroup_members(dir, 0, out); /* the members' pids, read again below with their state and faults */
  int n = out->n;
  memcpy(all, out->pid, (size_t)n * sizeof all[0]);
  /* A parent's stat read before its children's (pids ascend, wrap aside): a child that exits and is
   * waited for between the two reads is then missed for a tick, not counted twice in the faults. */
  qsort(all, (size_t)n, sizeof all[0], by_pid);
  out->n = 0;
  for (int i = 0; i < n; i++) {
    pid_t ppid;
    char state;
    uint64_t flt[2];
    pid_t task = stat_of(all[i], &ppid, &state, flt) == 0 ? alive(all[i], state) : 0;
    if (task) {
      out->task[out->n] = task;
      out->minflt[out->n] = flt[0];
      out->majflt[out->n] = flt[1];
      out->pid[out->n++] = all[i];
    }
  }
}

void msr_tree_of(const pid_t *roots, int nroots, int with_roots, msr_procs *out) {
  static pid_t pid[MSR_MAX_PROCS], ppid[MSR_MAX_PROCS];
  static char state[MSR_MAX_PROCS];
  static uint64_t flt[MSR_MAX_PROCS][2];
  int n = 0;
  out->n = 0;
  DIR *d = opendir("/proc");
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) && n < MSR_MAX_PROCS) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    pid_t p = (pid_t)atoi(e->d_name);
    if (stat_of(p, &ppid[n], &state[n], flt[n]) == 0) pid[n++] = p;
  }
  closedir(d);
  /* Breadth-first from the roots: their children, theirs, and so on. */
  static pid_t queue[MSR_MAX_PROCS];
  int head = 0, tail = 0;
  for (int r = 0; r < nroots && tail < MSR_MAX_PROCS; r++) {
    queue[tail++] = roots[r];
    if (!with_roots) continue;
    for (int i = 0; i < n; i++)
      if (pid[i] == roots[r] && out->n < MSR_MAX_PROCS && (out->task[out->n] = alive(pid[i], state[i]))) {
        out->minflt[out->n] = flt[i][0];
        out->majflt[out->n] = flt[i][1];
        out->pid[out->n++] = pid[i];
      }
  }
  while (head < tail) {
    pid_t parent = queue[head++];
    for (int i = 0; i < n; i++) {
      if (ppid[i] != parent || tail >= MSR_MAX_PROCS) continue;
      queue[tail++] = pid[i];
      if (out->n < MSR_MAX_PROCS && (out->task[out->n] = alive(pid[i], state[i]))) {
        out->minflt[out->n] = flt[i][0];
        out->majflt[out->n] = flt[i][1];
        out->pid[out->n++] = pid[i];
      }
    }
  }
}

void msr_tree_faults(const msr_procs *p, uint64_t *minflt, uint64_t *majflt) {
  uint64_t mn = 0, mj = 0;
  for (int i = 0; i < p->n; i++) {
    mn += p->minflt[i];
    mj += p->majflt[i];
  }
  *minflt = mn;
  *majflt = mj;
}

void msr_tree_rss_kb(const msr_procs *p, uint64_t *rss_kb, uint64_t *anon_kb) {
  static long page_kb;
  if (!page_kb) page_kb = sysconf(_SC_PAGESIZE) / 1024;
  uint64_t rss = 0, anon = 0;
  for (int i = 0; i < p->n; i++) {
    char path[96], buf[256];
    listed_file(p, i, "statm", path, sizeof path);
    if (read_small(path, buf, sizeof buf) <= 0) continue;
    unsigned long size = 0, resident = 0, shared = 0;
    if (sscanf(buf, "%lu %lu %lu", &size, &resident, &shared) != 3) continue;
    /* statm's "shared" is resident file-backed and shmem pages; the rest is anonymous. */
    rss += (uint64_t)resident * (uint64_t)page_kb;
    anon += (uint64_t)(resident > shared ? resident - shared : 0) * (uint64_t)page_kb;
  }
  *rss_kb = rss;
  *anon_kb = anon;
}

uint64_t msr_tree_heap_kb(const msr_procs *p) {
  uint64_t total = 0;
  for (int i = 0; i < p->n; i++) {
    char path[96], buf[8192];
    listed_file(p, i, "maps", path, sizeof path);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    /* [heap] follows the executable's own mappings: the first few KiB of maps hold it. */
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) continue;
    buf[n] = 0;
    char *h = strstr(buf, "[heap]");
    if (!h) continue;
    char *line = h;
    while (line > buf && line[-1] != '\n') line--;
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && hi > lo) total += (hi - lo) / 1024;
  }
  return total;
}

void msr_comm(pid_t pid, char *out, size_t cap) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
  if (read_small(path, out, cap) <= 0) {
    snprintf(out, cap, "?");
    return;
  }
  out[strcspn(out, "\n")] = 0;
}

static void add_rusage(struct rusage *a, const struct rusage *b) {
  a->ru_utime.tv_sec += b->ru_utime.tv_sec;
  a->ru_utime.tv_usec += b->ru_utime.tv_usec;
  a->ru_stime.tv_sec += b->ru_stime.tv_sec;
  a->ru_stime.tv_usec += b->ru_stime.tv_usec;
  a->ru_minflt += b->ru_minflt;
  a->ru_majflt += b->ru_majflt;
  a->ru_nvcsw += b->ru_nvcsw;
  a->ru_nivcsw += b->ru_nivcsw;
  if (b->ru_maxrss > a->ru_maxrss) a->ru_maxrss = b->ru_maxrss;
}

int msr_reap(msr_reaper *r) {
  int st;
  struct rusage ru;
  pid_t w;
  while ((w = wait4(-1, &st, WNOHANG, &ru)) > 0) {
    if (w == r->main) {
      r->main_status = st;
      r->main_ru = ru;
      r->main_done = 1;
    } else add_rusage(&r->others_ru, &ru);
  }
  return r->main_done;
}

void msr_kill_tree(pid_t pgid, msr_reaper *r) {
  if (pgid > 0) kill(-pgid, SIGKILL);
  msr_procs p;
  /* Bounded: a tree that forks while it is being killed still ends, since every new process
   * is a descendant that the next scan finds. */
  for (int round = 0; round < 2000; round++) {
    msr_reap(r);
    msr_descendants(&p);
    if (!p.n) break;
    for (int i = 0; i < p.n; i++) kill(p.pid[i], SIGKILL);
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  /* The last ones may have become zombies after the scan. */
  for (int round = 0; round < 1000 && !msr_reap(r); round++) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  msr_reap(r);
}
