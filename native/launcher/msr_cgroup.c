/* The command's own cgroup (cgroup v2), so that its counters are per-CPU cgroup events: an event
 * inherited by every new thread and process of the tree is copied into each one and summed back
 * when it ends (microseconds per event per task), which makes a program that creates threads or
 * processes several times slower than it is alone; a cgroup event costs nothing per task. */
#define _GNU_SOURCE
#include "msr_cgroup.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PREFIX "memsleuth-run-"

/* The cgroup2 mount point from /proc/self/mountinfo. */
static int v2_mount(char *out, size_t cap) {
  FILE *f = fopen("/proc/self/mountinfo", "re");
  if (!f) return -1;
  char *line = NULL;
  size_t n = 0;
  int found = -1;
  while (found < 0 && getline(&line, &n, f) > 0) {
    /* ID PARENT MAJ:MIN ROOT MOUNT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
    char *dash = strstr(line, " - ");
    char mnt[4096];
    if (!dash || strncmp(dash + 3, "cgroup2 ", 8) || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1) continue;
    if (strlen(mnt) < cap && !strchr(mnt, '\\')) { /* an escaped (odd) mount path is not used */
      strcpy(out, mnt);
      found = 0;
    }
  }
  free(line);
  fclose(f);
  return found;
}

/* This process's cgroup v2 path ("0::PATH" in /proc/self/cgroup). */
static int own_path(char *out, size_t cap) {
  FILE *f = fopen("/proc/self/cgroup", "re");
  if (!f) return -1;
  char line[4096];
  int found = -1;
  while (found < 0 && fgets(line, sizeof line, f)) {
    if (strncmp(line, "0::", 3)) continue;
    line[strcspn(line, "\n")] = 0;
    if (strlen(line + 3) < cap && !strstr(line + 3, "(deleted)")) {
      strcpy(out, line + 3);
      found = 0;
    }
  }
  fclose(f);
  return found;
}

/* Whether the perf_event controller sits on the v2 hierarchy (/proc/cgroups: hierarchy 0), not on a
 * v1 one, where a v2 cgroup's events would not open. */
static int perf_event_on_v2(void) {
  FILE *f = fopen("/proc/cgroups", "re");
  if (!f) return 1; /* a v2-only kernel may not list it: try */
  char name[64];
  int hier = 0, on = 1;
  while (fscanf(f, "%63s %d %*d %*d", name, &hier) == 2)
    if (!strcmp(name, "perf_event")) on = hier == 0;
  fclose(f);
  return on;
}

/* Removes the cgroups below the directory `dfd` (a nested ms-run's, or the command's own, left when
 * it was killed): rmdir refuses one that still has processes. */
static void remove_below(int dfd, int depth) {
  int fd = depth < 8 ? dup(dfd) : -1;
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0) close(fd);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d)))
    if (e->d_type == DT_DIR && e->d_name[0] != '.') {
      int sub = openat(dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (sub >= 0) {
        remove_below(sub, depth + 1);
        close(sub);
      }
      (void)unlinkat(dfd, e->d_name, AT_REMOVEDIR);
    }
  closedir(d);
}

/* The cgroups a memsleuth run left behind beside ours (its ms-run killed before it removed its
 * cgroup): the directory names the ms-run's pid; removed where that process no longer runs and
 * nothing is left in it (rmdir refuses a cgroup with processes). */
static void sweep(const char *parent) {
  DIR *d = opendir(parent);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d))) {
    if (strncmp(e->d_name, PREFIX, strlen(PREFIX))) continue;
    long pid = strtol(e->d_name + strlen(PREFIX), NULL, 10);
    if (pid <= 0 || (kill((pid_t)pid, 0) == 0 || errno == EPERM)) continue;
    int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (sub >= 0) {
      remove_below(sub, 0);
      close(sub);
    }
    (void)unlinkat(dirfd(d), e->d_name, AT_REMOVEDIR);
  }
  closedir(d);
}

int msr_cgroup_make(msr_cgroup *cg, char *why, size_t cap) {
  memset(cg, 0, sizeof *cg);
  cg->fd = -1;
  char mnt[4096], own[4096];
  if (!perf_event_on_v2()) {
    snprintf(why, cap, "the perf_event controller is on a cgroup v1 hierarchy");
    return -1;
  }
  if (v2_mount(mnt, sizeof mnt) || own_path(own, sizeof own)) {
    snprintf(why, cap, "no cgroup v2 hierarchy");
    return -1;
  }
  char parent[8192];
  snprintf(parent, sizeof parent, "%s%s", mnt, strcmp(own, "/") ? own : "");
  sweep(parent);
  snprintf(cg->path, sizeof cg->path, "%s/" PREFIX "%d", parent, (int)getpid());
  if (mkdir(cg->path, 0755) && errno != EEXIST) {
    snprintf(why, cap, "cannot create a cgroup under %s: %s", parent, strerror(errno));
    return -1;
  }
  cg->fd = open(cg->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (cg->fd < 0) {
    snprintf(why, cap, "cannot open %s: %s", cg->path, strerror(errno));
    (void)rmdir(cg->path);
    return -1;
  }
  return 0;
}

int msr_cgroup_enter(const msr_cgroup *cg, pid_t pid, char *why, size_t cap) {
  char p[sizeof cg->path + 16];
  snprintf(p, sizeof p, "%s/cgroup.procs", cg->path);
  int fd = open(p, O_WRONLY | O_CLOEXEC);
  char num[24];
  int len = snprintf(num, sizeof num, "%d\n", (int)pid);
  if (fd < 0 || write(fd, num, (size_t)len) != len) {
    snprintf(why, cap, "cannot move the command into %s: %s", cg->path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  close(fd);
  return 0;
}

void msr_cgroup_remove(msr_cgroup *cg) {
  if (cg->fd >= 0) {
    remove_below(cg->fd, 0);
    close(cg->fd);
  }
  cg->fd = -1;
  if (!cg->path[0]) return;
  /* The last task leaves the cgroup when it is reaped; a moment after that it can be removed. */
  for (int k = 0; k < 50 && rmdir(cg->path) && errno == EBUSY; k++) {
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
  }
  cg->path[0] = 0;
}
