/* `ms-run --preload-check`: which object malloc binds to in the command, without measuring it.
 *
 * The command is started with the allocator and libmscheck.so preloaded; the checker's
 * constructor reports and ends the process before the program's own code runs. So the check
 * costs one exec and dynamic linking, and no measured run carries the checker. A static
 * executable (or a script whose interpreter is one) is recognised from its ELF header and not
 * started at all: LD_PRELOAD cannot apply to it, and it would run to completion. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include "ms_json.h"
#include "msr.h"

#define CHECK_TIMEOUT_S 30.0

void msr_checker_path(const msr_options *o, char *out, size_t cap) {
  if (o->checker) {
    snprintf(out, cap, "%s", o->checker);
    return;
  }
  char self[PATH_MAX - 32];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  self[n > 0 ? n : 0] = 0;
  char *slash = strrchr(self, '/');
  if (slash) *slash = 0;
  snprintf(out, cap, "%s/libmscheck.so", self);
}

void msr_apply_env(const msr_options *o) {
  for (int k = 0; k < o->nenv; k++) putenv((char *)o->env[k]);
}

/* argv[0] as execvp would find it. */
static int find_program(const char *name, char *out, size_t cap) {
  if (strchr(name, '/')) {
    snprintf(out, cap, "%s", name);
    return access(out, X_OK);
  }
  const char *path = getenv("PATH");
  if (!path) path = "/usr/local/bin:/usr/bin:/bin";
  for (const char *p = path; *p;) {
    size_t len = strcspn(p, ":");
    snprintf(out, cap, "%.*s/%s", (int)len, p, name);
    if (len && access(out, X_OK) == 0) return 0;
    p += len + (p[len] == ':');
  }
  return -1;
}

enum { EXE_DYNAMIC, EXE_STATIC, EXE_UNKNOWN };

/* Whether an ELF file asks for a dynamic loader (PT_INTERP); a "#!" script is judged by its
 * interpreter, one level deep. */
static int exe_kind(const char *path, int depth) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return EXE_UNKNOWN;
  unsigned char head[256];
  ssize_t n = read(fd, head, sizeof head - 1);
  int kind = EXE_UNKNOWN;
  if (n >= 2 && head[0] == '#' && head[1] == '!' && depth == 0) {
    head[n] = 0;
    char *s = (char *)head + 2;
    while (*s == ' ' || *s == '\t') s++;
    s[strcspn(s, " \t\n")] = 0;
    close(fd);
    return *s ? exe_kind(s, 1) : EXE_UNKNOWN;
  }
  int cls = n >= (ssize_t)sizeof(Elf32_Ehdr) && !memcmp(head, ELFMAG, SELFMAG) ? head[EI_CLASS] : ELFCLASSNONE;
  if (cls == ELFCLASS64 && n < (ssize_t)sizeof(Elf64_Ehdr)) cls = ELFCLASSNONE;
  if (cls == ELFCLASS32 || cls == ELFCLASS64) {
    /* 32- or 64-bit alike: where the program headers are; p_type is the first word of both. */
    uint64_t phoff;
    unsigned phnum, phentsize;
    if (cls == ELFCLASS32) {
      Elf32_Ehdr eh;
      memcpy(&eh, head, sizeof eh);
      phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize;
    } else {
      Elf64_Ehdr eh;
      memcpy(&eh, head, sizeof eh);
      phoff = eh.e_phoff, phnum = eh.e_phnum, phentsize = eh.e_phentsize;
    }
    kind = EXE_STATIC;
    for (unsigned i = 0; i < phnum; i++) {
      uint32_t type;
      if (pread(fd, &type, sizeof type, (off_t)(phoff + (uint64_t)i * phentsize)) != (ssize_t)sizeof type) {
        kind = EXE_UNKNOWN;
        break;
      }
      if (type == PT_INTERP) {
        kind = EXE_DYNAMIC;
        break;
      }
    }
  }
  close(fd);
  return kind;
}

/* The "object" string of libmscheck's line (written by ms_json: \" \\ \n \t \r \u00XX). */
static void object_of(const char *lines, char *out, size_t cap) {
  out[0] = 0;
  const char *p = strstr(lines, "\"object\":\"");
  if (!p) return;
  p += 10;
  size_t k = 0;
  for (; *p && *p != '"' && k + 1 < cap; p++) {
    char c = *p;
    if (c == '\\' && p[1]) {
      p++;
      c = *p == 'n' ? '\n' : *p == 't' ? '\t' : *p == 'r' ? '\r' : *p;
      if (*p == 'u' && strlen(p) >= 5) {
        c = (char)strtol((char[]){p[3], p[4], 0}, NULL, 16);
        p += 4;
      }
    }
    out[k++] = c;
  }
  out[k] = 0;
}

static int same_file(const char *a, const char *b) {
  struct stat sa, sb;
  if (stat(a, &sa) < 0 || stat(b, &sb) < 0) return 0;
  return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

static int emit(const msr_options *o, int checked, int ok, const char *object, const char *why, const char *err,
                size_t errlen, int code, int sig) {
  ms_json j;
  msj_init_growable(&j, 4096);
  msj_obj_begin(&j, NULL);
  msj_raw(&j, checked ? "\"checked\":true" : "\"checked\":false");
  j.need_comma = 1;
  if (ok < 0) msj_null(&j, "preload_ok");
  else msj_raw(&j, ok ? ",\"preload_ok\":true" : ",\"preload_ok\":false");
  msj_str(&j, "preload", o->preload);
  msj_str(&j, "malloc_expected", o->expect_malloc);
  msj_str(&j, "malloc_object", object && object[0] ? object : NULL);
  msj_str(&j, "why", why);
  msj_strn(&j, "stderr_tail", err ? err : "", err ? errlen : 0);
  if (code >= 0) msj_i64(&j, "exit_code", code);
  else msj_null(&j, "exit_code");
  if (sig) {
    msj_i64(&j, "signal", sig);
    msj_str(&j, "signal_name", sigabbrev_np(sig));
  }
  msj_obj_end(&j);
  msj_raw(&j, "\n");
  if (j.overflow) {
    fputs("ms-run: out of memory writing the check\n", stderr);
    return 2;
  }
  fwrite(j.buf, 1, j.len, stdout);
  free(j.buf);
  return 0;
}

int msr_preload_check(const msr_options *o) {
  char checker[PATH_MAX], exe[PATH_MAX];
  msr_checker_path(o, checker, sizeof checker);
  if (access(checker, R_OK) != 0)
    return emit(o, 0, -1, NULL, "the checker library libmscheck.so was not found", NULL, 0, -1, 0);
  if (find_program(o->argv[0], exe, sizeof exe) != 0)
    return emit(o, 0, -1, NULL, "the command was not found or is not executable", NULL, 0, -1, 0);
  if (exe_kind(exe, 0) == EXE_STATIC)
    return emit(o, 0, o->preload ? 0 : -1, NULL,
                o->preload ? "a static executable: LD_PRELOAD does not apply to it, so the allocator was not loaded"
                           : "a static executable: its malloc is the one linked into it",
                NULL, 0, -1, 0);

  char errpath[] = "/tmp/ms-run-check-XXXXXX";
  int errfd = mkostemp(errpath, O_CLOEXEC);
  if (errfd >= 0) unlink(errpath);
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC)) {
    perror("ms-run: pipe");
    return 2;
  }
  pid_t pid = fork();
  if (pid < 0) {
    perror("ms-run: fork");
    return 2;
  }
  if (pid == 0) {
    setpgid(0, 0);
    int devnull = open("/dev/null", O_RDWR);
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(errfd >= 0 ? errfd : devnull, 2);
    int wfd = dup(pipefd[1]);
    char fdstr[16];
    snprintf(fdstr, sizeof fdstr, "%d", wfd);
    setenv("MEMSLEUTH_FD", fdstr, 1);
    setenv("MEMSLEUTH_PRELOAD_CHECK", "1", 1);
    msr_apply_env(o);
    /* The checker goes first: it defines no malloc, so the lookup order is unchanged, and the
     * dynamic linker runs the constructors of preloaded objects last-first, so the allocator's
     * own constructor has run (and may have crashed) before the checker ends the process. */
    char preload[2 * PATH_MAX + 2];
    snprintf(preload, sizeof preload, "%s%s%s", checker, o->preload ? ":" : "", o->preload ? o->preload : "");
    setenv("LD_PRELOAD", preload, 1);
    execv(exe, o->argv);
    /* Said on stderr (the check reports its tail), then the shell's code for "cannot execute". */
    int e = errno;
    dprintf(2, "ms-run: cannot execute %s: %s%s\n", exe, strerror(e),
            e == ENOEXEC ? " (not a binary the kernel can start: a script needs a #! line)" : "");
    _exit(126);
  }
  setpgid(pid, pid);
  close(pipefd[1]);
  char lines[16384];
  size_t len = 0;
  uint64_t deadline = msr_now_ns() + (uint64_t)(CHECK_TIMEOUT_S * 1e9);
  for (;;) {
    uint64_t now = msr_now_ns();
    if (now >= deadline) break;
    struct pollfd pfd = {pipefd[0], POLLIN, 0};
    int r = poll(&pfd, 1, (int)((deadline - now) / 1000000u) + 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    ssize_t n = read(pipefd[0], lines + len, sizeof lines - 1 - len);
    if (n <= 0) break;
    len += (size_t)n;
    if (len >= sizeof lines - 1) break;
  }
  lines[len] = 0;
  close(pipefd[0]);
  msr_reaper reaper;
  memset(&reaper, 0, sizeof reaper);
  reaper.main = pid;
  msr_kill_tree(pid, &reaper);
  int code = -1, sig = 0;
  if (reaper.main_done && WIFEXITED(reaper.main_status)) code = WEXITSTATUS(reaper.main_status);
  if (reaper.main_done && WIFSIGNALED(reaper.main_status)) sig = WTERMSIG(reaper.main_status);

  char err[4096];
  ssize_t errlen = errfd >= 0 ? pread(errfd, err, sizeof err - 1, 0) : 0;
  if (errlen < 0) errlen = 0;
  err[errlen] = 0;
  char object[PATH_MAX];
  object_of(lines, object, sizeof object);
  if (!object[0]) {
    const char *why = sig ? "the command was killed by a signal before its first instruction (a library's "
                            "constructor crashed?)"
                      : code == 126
                          ? "the command could not be executed (see stderr_tail): not a preload failure"
                          : "the checker library never loaded (LD_PRELOAD was refused or ignored: see stderr_tail)";
    /* A command the kernel cannot start says nothing about the preload: unchecked, not failed. */
    if (!sig && code == 126 && strstr(err, "ms-run: cannot execute"))
      return emit(o, 0, -1, NULL, why, err, (size_t)errlen, code, sig);
    return emit(o, 1, (o->preload || o->expect_malloc) ? 0 : -1, NULL, why, err, (size_t)errlen, code, sig);
  }
  int ok = -1;
  const char *why = NULL;
  if (o->expect_malloc) {
    ok = same_file(object, o->expect_malloc);
    if (!ok) why = "malloc binds to another object than the one expected";
  }
  return emit(o, 1, ok, object, why, err, (size_t)errlen, code, sig);
}
