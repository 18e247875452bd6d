/*
 * base/json.h — a small strict JSON reader for the files meshtrain reads
 * (hardware descriptions, safetensors headers): the whole text becomes a tree the caller walks
 * and checks key by key, so a schema with nested objects and arrays of
 * objects is validated in plain code, with the field's path in messages.
 *
 * RFC 8259 syntax; numbers become doubles; strings are UTF-8 (escapes
 * \" \\ \/ \b \f \n \r \t and \uXXXX decoded, surrogate pairs joined; a
 * lone surrogate and \u0000 refused); duplicate keys are refused. Nesting
 * deeper than 32 is refused. Large objects and arrays (a tokenizer's
 * vocabulary of 10^5 members) read in O(n log n).
 */
#ifndef MT_BASE_JSON_H
#define MT_BASE_JSON_H

#include "meshtrain/base.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { MT_JSON_NULL, MT_JSON_BOOL, MT_JSON_NUM, MT_JSON_STR, MT_JSON_ARR, MT_JSON_OBJ } mt_json_type;

typedef struct mt_json mt_json;
struct mt_json {
    mt_json_type type;
    size_t       at;       /* byte offset of the value in the text */
    bool         b;        /* MT_JSON_BOOL */
    double       num;      /* MT_JSON_NUM */
    char        *str;      /* MT_JSON_STR */
    int          n;        /* MT_JSON_ARR, MT_JSON_OBJ: children */
    mt_json    **kids;     /* [n] */
    char       **keys;     /* [n], MT_JSON_OBJ only */
};

/* Parses text[len] into a new tree *out (mt__json_free it). `path` names the
 * file in messages. MT_EFORMAT with the path, the byte offset and what was
 * expected there. */
mt_status mt__json_parse(const char *text, size_t len, const char *path, mt_json **out);

void mt__json_free(mt_json *j);

/* Reads the file at `path` (meshtrain/files.h's mt_input_read_all: `what`
 * names it in messages, max_bytes its limit) and parses it into *out.
 * With `object`, a top level that is not an object is refused
 * (MT_EFORMAT, "<what> '<path>' is an array, not an object"). */
mt_status mt__json_read_file(const char *path, const char *what, int64_t max_bytes, bool object,
                             mt_json **out);

/* The member `key` of object `obj`, or NULL (obj NULL or not an object). */
const mt_json *mt__json_get(const mt_json *obj, const char *key);

/* "an object", "a number", ...: for messages. */
const char *mt__json_type_name(mt_json_type t);

#endif /* MT_BASE_JSON_H */
