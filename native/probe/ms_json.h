/* A tiny JSON writer into a caller-owned fixed buffer: the probe must not call malloc. */
#ifndef MS_JSON_H
#define MS_JSON_H
#include <stddef.h>
#include <stdint.h>

typedef struct {
  char *buf;
  size_t cap, len;
  int need_comma;   /* a value was written at this nesting level */
  int overflow;
} ms_json;

void msj_init(ms_json *j, char *buf, size_t cap);
void msj_raw(ms_json *j, const char *s);
void msj_obj_begin(ms_json *j, const char *key);   /* key NULL for a top-level or array member */
void msj_obj_end(ms_json *j);
void msj_arr_begin(ms_json *j, const char *key);
void msj_arr_end(ms_json *j);
void msj_str(ms_json *j, const char *key, const char *val);        /* val NULL writes null */
void msj_strn(ms_json *j, const char *key, const char *val, size_t n);
void msj_u64(ms_json *j, const char *key, uint64_t v);
void msj_i64(ms_json *j, const char *key, int64_t v);
void msj_dbl(ms_json *j, const char *key, double v);
void msj_null(ms_json *j, const char *key);
#endif
