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
#include <sys/resource.h>
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

/* One stat file's text (/proc/PID/stat, or a thread's). The command name may hold spaces and
 * parentheses, so the fields are read after the last ')'. */
typedef struct {
  pid_t ppid;
  char state;
  uint64_t cminflt, cmajflt; /* the faults of the children it has waited for */
  msr_stat own;              /* its own faults (its threads', the ended ones' too), times, threads, start */
  int fields;                /* how many of the fields below were read: 2 at least, 10 for all */
} stat_line;

static int parse_stat(const char *buf, stat_line *s) {
  const char *rp = strrchr(buf, ')');
  unsigned long long mn = 0, cmn = 0, mj = 0, cmj = 0, ut = 0, st = 0, born = 0;
  int pp = 0, threads = 0;
  /* state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime cutime cstime
   * priority nice num_threads itrealvalue starttime */
  int got = rp ? sscanf(rp + 1, " %c %d %*d %*d %*d %*d %*u %llu %llu %llu %llu %llu %llu %*d %*d %*d %*d %d %*d %llu",
                        &s->state, &pp, &mn, &cmn, &mj, &cmj, &ut, &st, &threads, &born)
               : 0;
  if (got < 2) return -1;
  s->ppid = (pid_t)pp;
  s->cminflt = cmn;
  s->cmajflt = cmj;
  s->own = (msr_stat){mn, mj, ut, st, born, threads};
  s->fields = got;
  return 0;
}

/* ppid and state, and where `flt` is not NULL the faults: minor and major, each the process's own
 * plus those of the children it has waited for. */
static int stat_fields(const char *buf, pid_t *ppid, char *state, uint64_t *flt) {
  stat_line s;
  if (parse_stat(buf, &s)) return -1;
  *ppid = s.ppid;
  *state = s.state;
  if (flt) {
    flt[0] = s.fields >= 6 ? s.own.minflt + s.cminflt : 0;
    flt[1] = s.fields >= 6 ? s.own.majflt + s.cmajflt : 0;
  }
  return 0;
}

static int stat_at(const char *path, pid_t *ppid, char *state, uint64_t *flt) {
  char buf[1024];
  if (read_small(path, buf, sizeof buf) <= 0) return -1;
  return stat_fields(buf, ppid, state, flt);
}

static int stat_of(pid_t pid, pid_t *ppid, char *state, uint64_t *flt) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  return stat_at(path, ppid, state, flt);
}

/* ---- the tree's stat and statm files, kept open from one tick to the next ----
 * Opening and closing them was half of what a tick cost (the path walk, the pid's revalidation);
 * a kept file is read again from its start. A file of /proc/PID is the process's, never a later one's
 * that gets the pid back: once the process has gone, its read fails and the file is closed. At
 * most KEPT_MAX processes' files are kept, and only on descriptors below half of ms-run's limit
 * (the rest are opened for each read): the samplers' events, opened as processes appear, keep
 * their room. A process's files read at neither of the last two readings of the tree (attached, a
 * tick reads it twice) are closed. */
#define KEPT_MAX 64
enum { KEPT_STAT, KEPT_STATM };
typedef struct {
  pid_t pid, task; /* the task its statm is read through (msr_live_task) */
  int fd[2];
  unsigned gen;
} kept;
static kept g_kept[KEPT_MAX]; /* ascending pids */
static int g_nkept;
static unsigned g_gen = 1;

static void kept_close(kept *k, int which) {
  if (k->fd[which] >= 0) close(k->fd[which]);
  k->fd[which] = -1;
}

/* A new reading of the tree: the files read at neither of the last two are closed. */
static void kept_sweep(void) {
  int n = 0;
  for (int i = 0; i < g_nkept; i++) {
    if (g_kept[i].gen + 1 >= g_gen) {
      g_kept[n++] = g_kept[i];
      continue;
    }
    kept_close(&g_kept[i], KEPT_STAT);
    kept_close(&g_kept[i], KEPT_STATM);
  }
  g_nkept = n;
  g_gen++;
}

static kept *kept_of(pid_t pid) {
  int lo = 0, hi = g_nkept;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (g_kept[mid].pid < pid) lo = mid + 1;
    else hi = mid;
  }
  if (lo < g_nkept && g_kept[lo].pid == pid) return &g_kept[lo];
  if (g_nkept == KEPT_MAX) return NULL;
  memmove(&g_kept[lo + 1], &g_kept[lo], (size_t)(g_nkept - lo) * sizeof *g_kept);
  g_nkept++;
  g_kept[lo] = (kept){pid, pid, {-1, -1}, g_gen};
  return &g_kept[lo];
}

/* The text of a tree process's stat (`task` = its pid) or statm (through `task`) file. */
static ssize_t read_kept(pid_t pid, pid_t task, int which, char *buf, size_t cap) {
  char path[96];
  const char *name = which == KEPT_STAT ? "stat" : "statm";
  if (task > 0 && task != pid) snprintf(path, sizeof path, "/proc/%d/task/%d/%s", (int)pid, (int)task, name);
  else snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, name);
  kept *k = kept_of(pid);
  if (!k) return read_small(path, buf, cap);
  k->gen = g_gen;
  if (which == KEPT_STATM && k->task != task) { /* its main thread has ended since: read through another */
    kept_close(k, KEPT_STATM);
    k->task = task;
  }
  if (k->fd[which] < 0) {
    static long ceiling;
    if (!ceiling) {
      struct rlimit rl;
      ceiling = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (long)(rl.rlim_cur / 2) : 512;
    }
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    if (fd >= ceiling) { /* read once, not kept */
      ssize_t n = read(fd, buf, cap - 1);
      close(fd);
      if (n <= 0) return -1;
      buf[n] = 0;
      return n;
    }
    k->fd[which] = fd;
  }
  ssize_t n = pread(k->fd[which], buf, cap - 1, 0);
  if (n <= 0) {
    kept_close(k, which);
    return -1;
  }
  buf[n] = 0;
  return n;
}

int msr_proc_stat(pid_t pid, msr_stat *s) {
  char buf[1024];
  stat_line line;
  if (read_kept(pid, pid, KEPT_STAT, buf, sizeof buf) <= 0 || parse_stat(buf, &line) || line.fields < 10) return -1;
  *s = line.own;
  return 0;
}

/* A tree process's stat, through its kept file. */
static int stat_kept(pid_t pid, pid_t *ppid, char *state, uint64_t *flt) {
  char buf[1024];
  if (read_kept(pid, pid, KEPT_STAT, buf, sizeof buf) <= 0) return -1;
  return stat_fields(buf, ppid, state, flt);
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
  kept_sweep();
  for (int i = 0; i < n; i++) {
    pid_t ppid;
    char state;
    uint64_t flt[2];
    pid_t task = stat_kept(all[i], &ppid, &state, flt) == 0 ? alive(all[i], state) : 0;
    if (task) {
      out->task[out->n] = task;
      out->minflt[out->n] = flt[0];
      out->majflt[out->n] = flt[1];
      out->pid[out->n++] = all[i];
    }
  }
}

/* ---- the tree below some roots, kept from one call to the next ----
 * Every process /proc lists is remembered with the inode of its /proc entry (a process that gets a
 * pid back has a new one) and which side of the roots it is on: a process's parent changes only
 * when the parent ends, and then to an ancestor (a subreaper: ms-run) or to init, so a process
 * found outside the tree stays outside. A call then reads the stat files of the tree's own
 * processes and of the processes new since the last listing, not of every process on the machine
 * (a full scan of 3,000 processes took 30 ms here, three ticks' worth), and lists /proc when a task
 * was created since (/proc/loadavg's last pid, the pid namespace's cursor: pids are handed out in
 * turn, so a pid comes back only after a full turn of pid_max, each step of which moves it), and at
 * least every RELIST_NS. */
enum { K_OUTSIDE, K_INSIDE, K_ROOT, K_NEW };
typedef struct {
  pid_t pid, ppid;
  uint64_t ino;
  int side;
} known;

typedef struct {
  pid_t roots[MSR_MAX_ATTACH + 1];
  int nroots;
  known *k; /* ascending pids */
  int n;
  long last_pid;      /* at the last listing; -1: never listed */
  uint64_t listed_ns; /* when */
  int untrusted;      /* the last pid missed a process (lxcfs's loadavg, a sandbox's): list at every call */
} tracker;

/* /proc is listed at least this often, the last pid unmoved or not: a listing that finds a process
 * the last pid did not announce makes the tracker list at every call from then on. */
#define RELIST_NS 100000000ull

/* The last pid handed out in this pid namespace (the last field of /proc/loadavg), or -1. */
static long last_pid(void) {
  char buf[256];
  if (read_small("/proc/loadavg", buf, sizeof buf) <= 0) return -1;
  char *sp = strrchr(buf, ' ');
  return sp ? strtol(sp + 1, NULL, 10) : -1;
}

static known *find(tracker *t, pid_t pid) {
  int lo = 0, hi = t->n;
  while (lo < hi) {
    int mid = (lo + hi) / 2;
    if (t->k[mid].pid < pid) lo = mid + 1;
    else hi = mid;
  }
  return lo < t->n && t->k[lo].pid == pid ? &t->k[lo] : NULL;
}

static int is_root(const tracker *t, pid_t pid) {
  for (int r = 0; r < t->nroots; r++)
    if (t->roots[r] == pid) return 1;
  return 0;
}

static int by_known_pid(const void *a, const void *b) {
  pid_t x = ((const known *)a)->pid, y = ((const known *)b)->pid;
  return (x > y) - (x < y);
}

/* Lists /proc into a new table, keeping what is known of every process still there (same pid, same
 * inode); then decides the new ones' side from their parents' (`none_below`: every new one is
 * outside, the roots aside, with no stat file read: no process is below the roots yet). Returns how
 * many pids were not in the table before, or -1: /proc could not be listed. */
static int relist(tracker *t, int none_below) {
  DIR *d = opendir("/proc");
  if (!d) return -1;
  known *nk = NULL;
  int n = 0, cap = 0, sorted = 1, unseen = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
    if (n == cap) {
      int c = cap ? 2 * cap : 1024;
      known *g = realloc(nk, (size_t)c * sizeof *g);
      if (!g) {
        free(nk);
        closedir(d);
        return -1;
      }
      nk = g;
      cap = c;
    }
    pid_t pid = (pid_t)atoi(e->d_name);
    known *old = find(t, pid);
    unseen += !old;
    if (old && old->ino == (uint64_t)e->d_ino && old->side != K_NEW) nk[n] = *old;
    else nk[n] = (known){pid, 0, (uint64_t)e->d_ino, K_NEW};
    if (n && nk[n - 1].pid > pid) sorted = 0;
    n++;
  }
  closedir(d);
  if (!sorted) qsort(nk, (size_t)n, sizeof *nk, by_known_pid);
  free(t->k);
  t->k = nk;
  t->n = n;
  /* The new processes' parents, then their side: a parent that is itself new is decided first. */
  for (int i = 0; i < n; i++) {
    known *k = &nk[i];
    char state;
    if (k->side != K_NEW) continue;
    if (is_root(t, k->pid)) k->side = K_ROOT;
    else if (none_below) k->side = K_OUTSIDE;
    else if (stat_of(k->pid, &k->ppid, &state, NULL)) k->ppid = -1; /* gone already: no parent known */
  }
  for (int changed = 1; changed;) {
    changed = 0;
    for (int i = 0; i < n; i++) {
      known *k = &nk[i];
      if (k->side != K_NEW) continue;
      known *parent = k->ppid > 0 ? find(t, k->ppid) : NULL;
      if (parent && parent->side == K_NEW) continue; /* decided in a later pass, after its parent */
      if (is_root(t, k->ppid) || (parent && parent->side != K_OUTSIDE)) {
        k->side = K_INSIDE;
      } else {
        k->side = K_OUTSIDE;
        /* Unsure: a parent that is not listed (it ended as this one was read, and it may have been in
         * the tree: a child of a subreaper's is then the subreaper's) or is unsure itself; the process
         * itself unread. No inode is kept, so that the next listing reads it again. (ppid 0: init,
         * kthreadd, a process whose parent is outside this pid namespace; surely outside.) */
        if (k->ppid < 0 || (k->ppid > 0 && (!parent || !parent->ino))) k->ino = 0;
      }
      changed = 1;
    }
  }
  for (int i = 0; i < n; i++)
    if (nk[i].side == K_NEW) nk[i].side = K_OUTSIDE; /* a loop of parents: none is real */
  return unseen;
}

/* The tracker of these roots: ms-run follows its own descendants and, attached, the given processes'. */
static tracker *tracker_of(const pid_t *roots, int nroots) {
  static tracker ts[2];
  static int next;
  for (int i = 0; i < 2; i++)
    if (ts[i].nroots == nroots && !memcmp(roots, ts[i].roots, (size_t)nroots * sizeof *roots)) return &ts[i];
  tracker *t = &ts[next];
  next = !next;
  memcpy(t->roots, roots, (size_t)nroots * sizeof *roots);
  t->nroots = nroots;
  t->n = 0;
  t->last_pid = -1;
  t->listed_ns = 0;
  t->untrusted = 0;
  return t;
}

void msr_tree_of(const pid_t *roots, int nroots, int with_roots, msr_procs *out) {
  out->n = 0;
  if (nroots > MSR_MAX_ATTACH + 1) nroots = MSR_MAX_ATTACH + 1;
  tracker *tp = tracker_of(roots, nroots);
  long now = last_pid();
  uint64_t t = msr_now_ns();
  int moved = now < 0 || now != tp->last_pid || tp->untrusted;
  if (moved || t - tp->listed_ns >= RELIST_NS) {
    /* the cursor as read before the listing: a task created during it is listed again next time */
    int unseen = relist(tp, 0);
    if (unseen < 0) return;
    if (!moved && unseen && tp->listed_ns) tp->untrusted = 1;
    tp->last_pid = now;
    tp->listed_ns = t;
  }
  /* The tree's processes in ascending pids (a parent's stat read before its children's, wrap aside: a
   * child that exits and is waited for between the two reads is then missed for a tick, not counted
   * twice in the faults). */
  kept_sweep();
  for (int i = 0; i < tp->n && out->n < MSR_MAX_PROCS; i++) {
    known *k = &tp->k[i];
    if (k->side == K_OUTSIDE || (k->side == K_ROOT && !with_roots)) continue;
    pid_t ppid;
    char state;
    uint64_t flt[2];
    pid_t task = stat_kept(k->pid, &ppid, &state, flt) == 0 ? alive(k->pid, state) : 0;
    if (task) {
      out->task[out->n] = task;
      out->minflt[out->n] = flt[0];
      out->majflt[out->n] = flt[1];
      out->pid[out->n++] = k->pid;
    }
  }
}

void msr_tree_prepare(void) {
  pid_t self = getpid();
  tracker *t = tracker_of(&self, 1);
  long now = last_pid();
  if (relist(t, 1) >= 0) {
    t->last_pid = now;
    t->listed_ns = msr_now_ns();
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

void msr_tree_rss_kb(msr_procs *p, uint64_t *rss_kb, uint64_t *anon_kb) {
  static long page_kb;
  if (!page_kb) page_kb = sysconf(_SC_PAGESIZE) / 1024;
  uint64_t rss = 0, anon = 0;
  for (int i = 0; i < p->n; i++) {
    char buf[256];
    p->data[i] = 0;
    if (read_kept(p->pid[i], p->task[i], KEPT_STATM, buf, sizeof buf) <= 0) continue;
    unsigned long size = 0, resident = 0, shared = 0, text = 0, lib = 0, data = 0;
    int got = sscanf(buf, "%lu %lu %lu %lu %lu %lu", &size, &resident, &shared, &text, &lib, &data);
    if (got < 3) continue;
    /* statm's "shared" is resident file-backed and shmem pages; the rest is anonymous. */
    rss += (uint64_t)resident * (uint64_t)page_kb;
    anon += (uint64_t)(resident > shared ? resident - shared : 0) * (uint64_t)page_kb;
    p->data[i] = got == 6 ? data : 0;
  }
  *rss_kb = rss;
  *anon_kb = anon;
}

/* Each process's [heap] as last read from its maps, with statm's data size then: the break moves
 * the data size, so while a process's data size holds, its heap is as last read, and its maps (the
 * costliest file a tick reads: 60% of ms-run's time beside a tree of 60 processes) are not read. */
typedef struct {
  pid_t pid;
  uint64_t data, heap_kb;
} heap_known;

static int by_heap_pid(const void *a, const void *b) {
  pid_t x = ((const heap_known *)a)->pid, y = ((const heap_known *)b)->pid;
  return (x > y) - (x < y);
}

static uint64_t heap_of(const msr_procs *p, int i) {
  char path[96], buf[8192];
  listed_file(p, i, "maps", path, sizeof path);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  /* [heap] follows the executable's own mappings: the first few KiB of maps hold it. */
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  char *h = strstr(buf, "[heap]");
  if (!h) return 0;
  char *line = h;
  while (line > buf && line[-1] != '\n') line--;
  unsigned long lo, hi;
  return sscanf(line, "%lx-%lx", &lo, &hi) == 2 && hi > lo ? (hi - lo) / 1024 : 0;
}

uint64_t msr_tree_heap_kb(const msr_procs *p) {
  static heap_known *known_heaps; /* ascending pids */
  static int nknown;
  heap_known *now = p->n ? malloc((size_t)p->n * sizeof *now) : NULL;
  uint64_t total = 0;
  int sorted = 1;
  for (int i = 0; i < p->n; i++) {
    heap_known key = {p->pid[i], 0, 0}, *was = NULL;
    if (known_heaps) was = bsearch(&key, known_heaps, (size_t)nknown, sizeof key, by_heap_pid);
    uint64_t kb = was && p->data[i] && was->data == p->data[i] ? was->heap_kb : heap_of(p, i);
    total += kb;
    if (now) now[i] = (heap_known){p->pid[i], p->data[i], kb};
    if (i && p->pid[i] < p->pid[i - 1]) sorted = 0;
  }
  if (now && !sorted) qsort(now, (size_t)p->n, sizeof *now, by_heap_pid);
  free(known_heaps);
  known_heaps = now;
  nknown = now ? p->n : 0;
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
