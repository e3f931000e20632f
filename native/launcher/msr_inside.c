#define _GNU_SOURCE
#include "msr_inside.h"
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "msr_ring.h"

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

static int pidfd_open_(pid_t pid) { return (int)syscall(SYS_pidfd_open, pid, 0); }
static int pidfd_getfd_(int pidfd, int fd) { return (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0); }

/* Whether `fd` (ours) is a perf event: what a process's file names is checked, not trusted. */
static int is_perf_event(int fd) {
  char link[64], target[64];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  ssize_t n = readlink(link, target, sizeof target - 1);
  if (n <= 0) return 0;
  target[n] = 0;
  return !strcmp(target, "anon_inode:[perf_event]");
}

void msr_inside_open(msr_inside *w, const char *sites_dir, pid_t child) {
  memset(w, 0, sizeof *w);
  w->state_fd = w->fds_fd = -1;
  /* The child has not exec'd yet: its credentials are the command's (a setuid image drops
   * LD_PRELOAD, so it never runs the sampler). */
  int pidfd = pidfd_open_(child), got = -1;
  for (int fd = 0; pidfd >= 0 && fd <= 2 && got < 0; fd++) got = pidfd_getfd_(pidfd, fd);
  if (got < 0) {
    snprintf(w->why, sizeof w->why, "cannot take a file from the command (pidfd_getfd): %s", strerror(errno));
    if (pidfd >= 0) close(pidfd);
    return;
  }
  close(got);
  close(pidfd);
  if (snprintf(w->dir, sizeof w->dir, "%s/.switch", sites_dir) >= (int)sizeof w->dir ||
      (mkdir(w->dir, 0700) && errno != EEXIST)) {
    snprintf(w->why, sizeof w->why, "its folder: %s", strerror(errno));
    return;
  }
  char state[4200], fds[4200];
  snprintf(state, sizeof state, "%s/state", w->dir);
  snprintf(fds, sizeof fds, "%s/fds", w->dir);
  w->state_fd = open(state, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (w->state_fd < 0 || pwrite(w->state_fd, "1", 1, 0) != 1)
    snprintf(w->why, sizeof w->why, "its state file: %s", strerror(errno));
  else if ((w->fds_fd = open(fds, O_RDONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0)
    snprintf(w->why, sizeof w->why, "its list of events: %s", strerror(errno));
  if (w->why[0]) { /* neither file is left behind */
    if (w->state_fd >= 0) close(w->state_fd);
    w->state_fd = -1;
    unlink(state);
    unlink(fds);
    rmdir(w->dir);
    return;
  }
  w->on = 1;
  w->enabled = 1;
}

static void drop(msr_inside *w, int k) {
  close(w->fd[k]);
  close(w->pidfd[k]);
  w->nheld--;
  w->pid[k] = w->pid[w->nheld];
  w->fd[k] = w->fd[w->nheld];
  w->pidfd[k] = w->pidfd[w->nheld];
}

/* The event `num` of process `pid`, taken and set to the tick's state. */
static void take(msr_inside *w, pid_t pid, int num) {
  for (int k = w->nheld - 1; k >= 0; k--) /* its image before an exec: that event went with it */
    if (w->pid[k] == pid) drop(w, k);
  if (w->nheld == MSR_INSIDE_PROCS) {
    w->full++;
    return;
  }
  int pidfd = pidfd_open_(pid);
  int fd = pidfd >= 0 ? pidfd_getfd_(pidfd, num) : -1;
  if (fd < 0 || !is_perf_event(fd)) {
    /* It ended first, or exec'd (a forked child's fd closed at exec, its number maybe reused by
     * the new image); refused: not permitted. */
    if (fd >= 0 || errno == ESRCH || errno == EBADF) w->gone++;
    else w->refused++;
    if (fd >= 0) close(fd);
    if (pidfd >= 0) close(pidfd);
    return;
  }
  msr_fds_enable(&fd, 1, w->on);
  w->pid[w->nheld] = pid;
  w->pidfd[w->nheld] = pidfd;
  w->fd[w->nheld] = fd;
  w->nheld++;
  w->taken++;
}

void msr_inside_tick(msr_inside *w, int on) {
  if (!w->enabled) return;
  if (on != w->on) {
    w->on = on;
    (void)!pwrite(w->state_fd, on ? "1" : "0", 1, 0);
    msr_fds_enable(w->fd, w->nheld, on);
  }
  if (w->nheld) { /* a process that exited: its pidfd reads ready */
    struct pollfd p[MSR_INSIDE_PROCS];
    for (int k = 0; k < w->nheld; k++) p[k] = (struct pollfd){.fd = w->pidfd[k], .events = POLLIN};
    if (poll(p, (nfds_t)w->nheld, 0) > 0)
      for (int k = w->nheld - 1; k >= 0; k--)
        if (p[k].revents) drop(w, k);
  }
  /* The lines appended since the last tick: whole lines only (a write may be under way). */
  char buf[4096];
  for (;;) {
    ssize_t n = pread(w->fds_fd, buf, sizeof buf - 1, (off_t)w->read_to);
    if (n <= 0) return;
    buf[n] = 0;
    char *line = buf, *nl;
    while ((nl = strchr(line, '\n'))) {
      *nl = 0;
      char *end;
      long pid = strtol(line, &end, 10), num = -1;
      if (end != line && *end == ' ') num = strtol(end + 1, &end, 10);
      if (pid > 0 && num >= 0 && num < (1L << 30) && !*end) take(w, (pid_t)pid, (int)num);
      w->read_to += (uint64_t)(nl + 1 - line);
      line = nl + 1;
    }
    if (line == buf) return; /* no whole line: the rest comes at the next tick */
  }
}

void msr_inside_close(msr_inside *w) {
  if (!w->dir[0]) return; /* never opened (a zeroed struct: no fd of its own) */
  while (w->nheld) drop(w, w->nheld - 1);
  if (w->state_fd >= 0) close(w->state_fd);
  if (w->fds_fd >= 0) close(w->fds_fd);
  w->state_fd = w->fds_fd = -1;
  char path[4200];
  for (const char *const *name = (const char *const[]){"state", "fds", NULL}; *name; name++) {
    snprintf(path, sizeof path, "%s/%s", w->dir, *name);
    unlink(path);
  }
  rmdir(w->dir);
}

void msr_inside_json(ms_json *j, const msr_inside *w) {
  msj_obj_begin(j, "inside_switch");
  msj_bool(j, "enabled", w->enabled);
  msj_u64(j, "taken", w->taken);
  msj_u64(j, "gone", w->gone);
  msj_u64(j, "refused", w->refused);
  msj_u64(j, "full", w->full);
  if (w->why[0]) msj_str(j, "why", w->why);
  msj_obj_end(j);
}
