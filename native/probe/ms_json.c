#include "ms_json.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

void msj_init(ms_json *j, char *buf, size_t cap) {
  j->buf = buf;
  j->cap = cap;
  j->len = 0;
  j->need_comma = 0;
  j->overflow = 0;
  j->growable = 0;
  if (cap) buf[0] = 0;
}

int msj_init_growable(ms_json *j, size_t initial) {
  char *buf = malloc(initial ? initial : 1);
  msj_init(j, buf, buf ? (initial ? initial : 1) : 0);
  j->growable = 1;
  if (!buf) j->overflow = 1;
  return buf ? 0 : -1;
}

static void put(ms_json *j, const char *s, size_t n) {
  if (j->len + n + 1 > j->cap && j->growable && !j->overflow) {
    size_t cap = j->cap ? j->cap : 64;
    while (cap < j->len + n + 1) cap *= 2;
    char *p = realloc(j->buf, cap);
    if (p) {
      j->buf = p;
      j->cap = cap;
    }
  }
  if (j->len + n + 1 > j->cap) {
    j->overflow = 1;
    return;
  }
  memcpy(j->buf + j->len, s, n);
  j->len += n;
  j->buf[j->len] = 0;
}

void msj_raw(ms_json *j, const char *s) { put(j, s, strlen(s)); }

static void escaped(ms_json *j, const char *s, size_t n) {
  put(j, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char e[8];
    if (c == '"' || c == '\\') {
      e[0] = '\\';
      e[1] = (char)c;
      put(j, e, 2);
    } else if (c == '\n') put(j, "\\n", 2);
    else if (c == '\t') put(j, "\\t", 2);
    else if (c == '\r') put(j, "\\r", 2);
    else if (c < 0x20 || c == 0x7f) {
      snprintf(e, sizeof e, "\\u%04x", c);
      put(j, e, 6);
    } else put(j, (const char *)&s[i], 1);
  }
  put(j, "\"", 1);
}

static void key(ms_json *j, const char *k) {
  if (j->need_comma) put(j, ",", 1);
  j->need_comma = 1;
  if (k) {
    escaped(j, k, strlen(k));
    put(j, ":", 1);
  }
}

/* An object or array opens (its key, the bracket: nothing written in it yet) and closes. */
static void open_nested(ms_json *j, const char *k, const char *bracket) {
  key(j, k);
  put(j, bracket, 1);
  j->need_comma = 0;
}
static void close_nested(ms_json *j, const char *bracket) {
  put(j, bracket, 1);
  j->need_comma = 1;
}
void msj_obj_begin(ms_json *j, const char *k) { open_nested(j, k, "{"); }
void msj_obj_end(ms_json *j) { close_nested(j, "}"); }
void msj_arr_begin(ms_json *j, const char *k) { open_nested(j, k, "["); }
void msj_arr_end(ms_json *j) { close_nested(j, "]"); }

void msj_line_begin(ms_json *j, char *buf, size_t cap, const char *type, int64_t pid) {
  msj_init(j, buf, cap);
  msj_obj_begin(j, NULL);
  msj_str(j, "type", type);
  msj_i64(j, "pid", pid);
}

void msj_strn(ms_json *j, const char *k, const char *v, size_t n) {
  key(j, k);
  if (!v) put(j, "null", 4);
  else escaped(j, v, n);
}
void msj_str(ms_json *j, const char *k, const char *v) { msj_strn(j, k, v, v ? strlen(v) : 0); }
void msj_u64(ms_json *j, const char *k, uint64_t v) {
  char b[32];
  key(j, k);
  snprintf(b, sizeof b, "%llu", (unsigned long long)v);
  msj_raw(j, b);
}
void msj_i64(ms_json *j, const char *k, int64_t v) {
  char b[32];
  key(j, k);
  snprintf(b, sizeof b, "%lld", (long long)v);
  msj_raw(j, b);
}
void msj_dbl(ms_json *j, const char *k, double v) {
  char b[48];
  key(j, k);
  if (v != v) {
    msj_raw(j, "null");
    return;
  } /* NaN is not JSON */
  snprintf(b, sizeof b, "%.17g", v);
  msj_raw(j, b);
}
void msj_bool(ms_json *j, const char *k, int v) {
  key(j, k);
  msj_raw(j, v ? "true" : "false");
}
void msj_null(ms_json *j, const char *k) {
  key(j, k);
  msj_raw(j, "null");
}

int msj_append_line(const char *path, const char *text, size_t len) {
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  char nl = '\n';
  struct iovec v[3] = {{&nl, 1}, {(void *)text, len}, {&nl, 1}};
  size_t want = len + 2;
  ssize_t w;
  do w = writev(fd, v, 3);
  while (w < 0 && errno == EINTR);
  int saved = errno;
  close(fd);
  errno = saved;
  /* Cut short (a full disk): the next document's newline ends what was written. */
  return w == (ssize_t)want ? 0 : -1;
}
