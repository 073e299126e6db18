/* Accelerator for airflow_delta_maintenance.deltalog.replay.commit_stream (the strict validation of
 * every line of a commit publish is about to copy): vouches for the plain ``add`` and ``remove``
 * lines that make up nearly all of a large commit, so that only the rest is parsed in Python.
 *
 * Exactness rule: a line is *clean* only when the pure path (json.loads with the strict hooks, then
 * model.validation's rules) certainly accepts it as one add or remove action, with the path this
 * module returns; everything else is left to the pure path, which decides it and words its error.
 * A clean line is: JSON whitespace, one object holding exactly one key, ``"add"`` or ``"remove"``,
 * whose value is an object in which
 *   - every key is unescaped valid UTF-8 and no key repeats (within any object);
 *   - the known fields have their protocol types: path a non-empty string not starting with
 *     ``file:/`` (readers reconcile those by another key), partitionValues and tags objects of
 *     strings or nulls, size / baseRowId / defaultRowCommitVersion non-negative integers,
 *     modificationTime / deletionTimestamp integers, dataChange / extendedFileMetadata booleans,
 *     stats / clusteringProvider strings; integers are plain JSON integers of at most 18 digits;
 *   - the required fields are present and not null (add: path, partitionValues, size,
 *     modificationTime, dataChange; remove: path, dataChange);
 *   - deletionVector is absent or null (a deletion vector's own rules are the pure path's);
 *   - unknown fields hold JSON values without floats, NaN/Infinity or over-long integers;
 *   - strings hold valid UTF-8, no control characters, and no escape of a UTF-16 surrogate;
 *   - nothing nests deeper than MAX_DEPTH (the pure path allows 64).
 * The path is returned only when it holds no escape (else the line is left to the pure path).
 * Given ``allowed`` (the table's partition-value keys), an add is clean only when every key of its
 * partitionValues is one of them (else the pure path refuses it, naming the key).
 *
 * scan(block[, allowed]) -> (codes, paths)
 *   block: bytes-like, lines separated by b"\n" (as bytes.split(b"\n") cuts them);
 *   allowed: None or a tuple of at most MAX_ALLOWED bytes (UTF-8 keys); module attribute
 *            PARTITION_KEYS says this argument is understood;
 *   codes: bytes, one per line: 0 blank (only b" \t\r\x0b\x0c"), 1 clean add, 2 clean remove,
 *          3 anything else;
 *   paths: list of str, the path of each clean line in order.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_DEPTH 16
#define MAX_KEYS 64
#define MAX_ALLOWED 64

/* The keys an add's partitionValues may carry (count < 0: any). */
typedef struct {
    const char *s[MAX_ALLOWED];
    Py_ssize_t n[MAX_ALLOWED];
    Py_ssize_t count;
} Allowed;

static int is_allowed(const Allowed *a, const uint8_t *s, Py_ssize_t n) {
    if (a == NULL || a->count < 0) return 1;
    for (Py_ssize_t i = 0; i < a->count; i++) {
        if (a->n[i] == n && memcmp(a->s[i], s, (size_t)n) == 0) return 1;
    }
    return 0;
}

enum { BLANK = 0, ADD = 1, REMOVE = 2, OTHER = 3 };

typedef struct {
    const uint8_t *p, *end;
} Cur;

static inline void skip_ws(Cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r')) c->p++;
}

static inline int hex4(const uint8_t *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        uint8_t ch = p[i];
        v <<= 4;
        if (ch >= '0' && ch <= '9') v |= (unsigned)(ch - '0');
        else if (ch >= 'a' && ch <= 'f') v |= (unsigned)(ch - 'a' + 10);
        else if (ch >= 'A' && ch <= 'F') v |= (unsigned)(ch - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

/* One UTF-8 sequence starting at a byte >= 0x80: its length, or 0 when it is not valid UTF-8
 * (overlong forms, surrogates and code points above U+10FFFF are invalid, as Python's decoder says). */
static inline int utf8_len(const uint8_t *p, const uint8_t *end) {
    uint8_t b0 = p[0];
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        return (end - p >= 2 && (p[1] & 0xC0) == 0x80) ? 2 : 0;
    }
    if (b0 >= 0xE0 && b0 <= 0xEF) {
        if (end - p < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return 0;
        if (b0 == 0xE0 && p[1] < 0xA0) return 0;  /* overlong */
        if (b0 == 0xED && p[1] >= 0xA0) return 0; /* surrogate */
        return 3;
    }
    if (b0 >= 0xF0 && b0 <= 0xF4) {
        if (end - p < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return 0;
        if (b0 == 0xF0 && p[1] < 0x90) return 0;  /* overlong */
        if (b0 == 0xF4 && p[1] >= 0x90) return 0; /* above U+10FFFF */
        return 4;
    }
    return 0;
}

/* A string at c->p (the opening quote). On success c->p is past the closing quote, *s and *n are
 * its raw content and *escaped says whether it held a backslash. */
static int string(Cur *c, const uint8_t **s, Py_ssize_t *n, int *escaped) {
    if (c->p >= c->end || *c->p != '"') return 0;
    const uint8_t *p = ++c->p;
    *escaped = 0;
    while (p < c->end) {
        uint8_t ch = *p;
        if (ch == '"') {
            *s = c->p;
            *n = p - c->p;
            c->p = p + 1;
            return 1;
        }
        if (ch == '\\') {
            *escaped = 1;
            if (p + 1 >= c->end) return 0;
            uint8_t e = p[1];
            if (e == 'u') {
                unsigned v;
                if (c->end - p < 6 || !hex4(p + 2, &v)) return 0;
                if (v >= 0xD800 && v <= 0xDFFF) return 0; /* surrogates: the pure path decides */
                p += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                p += 2;
            } else {
                return 0;
            }
        } else if (ch < 0x20) {
            return 0; /* control characters: json's strict mode refuses them */
        } else if (ch < 0x80) {
            p++;
        } else {
            int len = utf8_len(p, c->end);
            if (!len) return 0;
            p += len;
        }
    }
    return 0;
}

/* The byte after a scalar must end it (what json's scanner expects next). */
static inline int ends_value(Cur *c) {
    if (c->p >= c->end) return 1;
    uint8_t ch = *c->p;
    return ch == ' ' || ch == '\t' || ch == '\r' || ch == ',' || ch == '}' || ch == ']';
}

/* A plain JSON integer of at most 18 digits (no fraction or exponent). */
static int integer(Cur *c, int64_t *out) {
    const uint8_t *p = c->p;
    int neg = 0;
    if (p < c->end && *p == '-') { neg = 1; p++; }
    if (p >= c->end || *p < '0' || *p > '9') return 0;
    const uint8_t *digits = p;
    int64_t v = 0;
    if (*p == '0') {
        p++;
    } else {
        while (p < c->end && *p >= '0' && *p <= '9') {
            if (p - digits >= 18) return 0;
            v = v * 10 + (*p - '0');
            p++;
        }
    }
    c->p = p;
    if (!ends_value(c)) return 0; /* a fraction, an exponent, "01" or trailing bytes */
    *out = neg ? -v : v;
    return 1;
}

static int literal(Cur *c, const char *word, size_t len) {
    if ((size_t)(c->end - c->p) < len || memcmp(c->p, word, len) != 0) return 0;
    c->p += len;
    return ends_value(c);
}

typedef struct {
    const uint8_t *s[MAX_KEYS];
    Py_ssize_t n[MAX_KEYS];
    int count;
} Keys;

/* Record a key; 0 when it is escaped, repeats, or the object has too many keys. */
static int new_key(Keys *k, const uint8_t *s, Py_ssize_t n, int escaped) {
    if (escaped || k->count >= MAX_KEYS) return 0;
    for (int i = 0; i < k->count; i++) {
        if (k->n[i] == n && memcmp(k->s[i], s, (size_t)n) == 0) return 0;
    }
    k->s[k->count] = s;
    k->n[k->count] = n;
    k->count++;
    return 1;
}

static int value(Cur *c, int depth);

/* An object or list at c->p, every value checked by value() at depth + 1. */
static int container(Cur *c, int depth) {
    if (depth > MAX_DEPTH) return 0;
    uint8_t open = *c->p++;
    skip_ws(c);
    if (open == '[') {
        if (c->p < c->end && *c->p == ']') { c->p++; return 1; }
        for (;;) {
            if (!value(c, depth + 1)) return 0;
            skip_ws(c);
            if (c->p >= c->end) return 0;
            if (*c->p == ']') { c->p++; return 1; }
            if (*c->p != ',') return 0;
            c->p++;
            skip_ws(c);
        }
    }
    Keys keys;
    keys.count = 0;
    if (c->p < c->end && *c->p == '}') { c->p++; return 1; }
    for (;;) {
        const uint8_t *s;
        Py_ssize_t n;
        int escaped;
        if (!string(c, &s, &n, &escaped) || !new_key(&keys, s, n, escaped)) return 0;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':') return 0;
        c->p++;
        skip_ws(c);
        if (!value(c, depth + 1)) return 0;
        skip_ws(c);
        if (c->p >= c->end) return 0;
        if (*c->p == '}') { c->p++; return 1; }
        if (*c->p != ',') return 0;
        c->p++;
        skip_ws(c);
    }
}

/* Any JSON value the pure path accepts unchanged (no floats, constants or long integers). */
static int value(Cur *c, int depth) {
    if (c->p >= c->end) return 0;
    const uint8_t *s;
    Py_ssize_t n;
    int escaped;
    int64_t v;
    switch (*c->p) {
        case '{':
        case '[': return container(c, depth);
        case '"': return string(c, &s, &n, &escaped) && ends_value(c);
        case 't': return literal(c, "true", 4);
        case 'f': return literal(c, "false", 5);
        case 'n': return literal(c, "null", 4);
        default: return integer(c, &v);
    }
}

/* An object of strings or nulls (partitionValues, tags), or null when may_be_null; every key one
 * of ``allowed`` (NULL: any). */
static int string_map(Cur *c, int depth, int may_be_null, int *was_null, const Allowed *allowed) {
    *was_null = 0;
    if (c->p < c->end && *c->p == 'n') {
        *was_null = 1;
        return may_be_null && literal(c, "null", 4);
    }
    if (c->p >= c->end || *c->p != '{') return 0;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') { c->p++; return 1; }
    Keys keys;
    keys.count = 0;
    for (;;) {
        const uint8_t *s;
        Py_ssize_t n;
        int escaped;
        if (!string(c, &s, &n, &escaped) || !new_key(&keys, s, n, escaped) || !is_allowed(allowed, s, n)) return 0;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':') return 0;
        c->p++;
        skip_ws(c);
        if (c->p < c->end && *c->p == 'n') {
            if (!literal(c, "null", 4)) return 0;
        } else if (!string(c, &s, &n, &escaped) || !ends_value(c)) {
            return 0;
        }
        skip_ws(c);
        if (c->p >= c->end) return 0;
        if (*c->p == '}') { c->p++; return 1; }
        if (*c->p != ',') return 0;
        c->p++;
        skip_ws(c);
    }
}

enum {
    F_PATH, F_PARTITION_VALUES, F_SIZE, F_MODIFICATION_TIME, F_DATA_CHANGE, F_STATS, F_TAGS, F_DELETION_VECTOR,
    F_BASE_ROW_ID, F_DEFAULT_ROW_COMMIT_VERSION, F_CLUSTERING_PROVIDER, F_DELETION_TIMESTAMP, F_EXTENDED_FILE_METADATA,
    F_UNKNOWN
};

static int field_of(const uint8_t *s, Py_ssize_t n, int is_add) {
#define IS(word) (n == (Py_ssize_t)sizeof(word) - 1 && memcmp(s, word, sizeof(word) - 1) == 0)
    if (IS("path")) return F_PATH;
    if (IS("partitionValues")) return F_PARTITION_VALUES;
    if (IS("size")) return F_SIZE;
    if (IS("dataChange")) return F_DATA_CHANGE;
    if (IS("stats")) return F_STATS;
    if (IS("tags")) return F_TAGS;
    if (IS("deletionVector")) return F_DELETION_VECTOR;
    if (IS("baseRowId")) return F_BASE_ROW_ID;
    if (IS("defaultRowCommitVersion")) return F_DEFAULT_ROW_COMMIT_VERSION;
    if (is_add) {
        if (IS("modificationTime")) return F_MODIFICATION_TIME;
        if (IS("clusteringProvider")) return F_CLUSTERING_PROVIDER;
    } else {
        if (IS("deletionTimestamp")) return F_DELETION_TIMESTAMP;
        if (IS("extendedFileMetadata")) return F_EXTENDED_FILE_METADATA;
    }
    return F_UNKNOWN;
#undef IS
}

/* An add or remove body at c->p; its path in *path / *path_len. Depth 2 (the line's object is 1). */
static int file_action(Cur *c, int is_add, const uint8_t **path, Py_ssize_t *path_len, const Allowed *allowed) {
    if (c->p >= c->end || *c->p != '{') return 0;
    c->p++;
    skip_ws(c);
    Keys keys;
    keys.count = 0;
    unsigned present = 0; /* fields given a non-null value */
    *path = NULL;
    if (c->p < c->end && *c->p == '}') return 0; /* no path */
    for (;;) {
        const uint8_t *s;
        Py_ssize_t n;
        int escaped, was_null = 0;
        int64_t v;
        if (!string(c, &s, &n, &escaped) || !new_key(&keys, s, n, escaped)) return 0;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':') return 0;
        c->p++;
        skip_ws(c);
        int f = field_of(s, n, is_add);
        int is_null = c->p < c->end && *c->p == 'n';
        if (is_null && f != F_UNKNOWN) {
            /* an optional field given null is absent; a required one is an error the pure path words */
            if (!literal(c, "null", 4)) return 0;
        } else {
            switch (f) {
                case F_PATH:
                    if (!string(c, &s, &n, &escaped) || !ends_value(c) || escaped || n == 0) return 0;
                    if (n >= 6 && memcmp(s, "file:/", 6) == 0) return 0;
                    *path = s;
                    *path_len = n;
                    break;
                case F_PARTITION_VALUES:
                    if (!string_map(c, 3, 0, &was_null, is_add ? allowed : NULL)) return 0;
                    break;
                case F_TAGS:
                    if (!string_map(c, 3, 0, &was_null, NULL)) return 0;
                    break;
                case F_SIZE:
                case F_BASE_ROW_ID:
                case F_DEFAULT_ROW_COMMIT_VERSION:
                    if (!integer(c, &v) || v < 0) return 0;
                    break;
                case F_MODIFICATION_TIME:
                case F_DELETION_TIMESTAMP:
                    if (!integer(c, &v)) return 0;
                    break;
                case F_DATA_CHANGE:
                case F_EXTENDED_FILE_METADATA:
                    if (!(literal(c, "true", 4) || literal(c, "false", 5))) return 0;
                    break;
                case F_STATS:
                case F_CLUSTERING_PROVIDER:
                    if (!string(c, &s, &n, &escaped) || !ends_value(c)) return 0;
                    break;
                case F_DELETION_VECTOR:
                    return 0; /* a deletion vector: the pure path's rules */
                default:
                    if (!value(c, 3)) return 0;
            }
            if (f != F_UNKNOWN) present |= 1u << f;
        }
        skip_ws(c);
        if (c->p >= c->end) return 0;
        if (*c->p == '}') { c->p++; break; }
        if (*c->p != ',') return 0;
        c->p++;
        skip_ws(c);
    }
    unsigned required = (1u << F_PATH) | (1u << F_DATA_CHANGE);
    if (is_add) required |= (1u << F_PARTITION_VALUES) | (1u << F_SIZE) | (1u << F_MODIFICATION_TIME);
    return (present & required) == required && *path != NULL;
}

static int classify(const uint8_t *line, const uint8_t *end, const uint8_t **path, Py_ssize_t *path_len, const Allowed *allowed) {
    const uint8_t *q = line;
    while (q < end && (*q == ' ' || *q == '\t' || *q == '\r' || *q == 0x0b || *q == 0x0c)) q++;
    if (q == end) return BLANK;
    Cur c = {line, end};
    skip_ws(&c);
    if (c.p >= c.end || *c.p != '{') return OTHER;
    c.p++;
    skip_ws(&c);
    const uint8_t *s;
    Py_ssize_t n;
    int escaped;
    if (!string(&c, &s, &n, &escaped) || escaped) return OTHER;
    int kind = (n == 3 && memcmp(s, "add", 3) == 0) ? ADD : (n == 6 && memcmp(s, "remove", 6) == 0) ? REMOVE : OTHER;
    if (kind == OTHER) return OTHER;
    skip_ws(&c);
    if (c.p >= c.end || *c.p != ':') return OTHER;
    c.p++;
    skip_ws(&c);
    if (!file_action(&c, kind == ADD, path, path_len, allowed)) return OTHER;
    skip_ws(&c);
    if (c.p >= c.end || *c.p != '}') return OTHER; /* one key only */
    c.p++;
    skip_ws(&c);
    return c.p == c.end ? kind : OTHER;
}

static PyObject *log_lines_scan(PyObject *self, PyObject *args) {
    PyObject *arg, *keys = Py_None;
    if (!PyArg_ParseTuple(args, "O|O:scan", &arg, &keys)) return NULL;
    Allowed allowed;
    allowed.count = -1;
    if (keys != Py_None) {
        if (!PyTuple_Check(keys) || PyTuple_Size(keys) > MAX_ALLOWED) {
            PyErr_SetString(PyExc_TypeError, "scan: allowed must be None or a tuple of at most 64 bytes");
            return NULL;
        }
        allowed.count = PyTuple_Size(keys);
        for (Py_ssize_t i = 0; i < allowed.count; i++) {
            char *k;
            /* the tuple holds the bytes alive for the call */
            if (PyBytes_AsStringAndSize(PyTuple_GetItem(keys, i), &k, &allowed.n[i]) < 0) return NULL;
            allowed.s[i] = k;
        }
    }
    Py_buffer buf;
    if (PyObject_GetBuffer(arg, &buf, PyBUF_SIMPLE) < 0) return NULL;
    const uint8_t *data = buf.buf, *end = data + buf.len;
    Py_ssize_t lines = 1;
    for (const uint8_t *p = data; (p = memchr(p, '\n', (size_t)(end - p))) != NULL; p++) lines++;
    PyObject *codes = PyBytes_FromStringAndSize(NULL, lines);
    PyObject *paths = PyList_New(0);
    PyObject *result = NULL;
    if (codes == NULL || paths == NULL) goto done;
    char *out = PyBytes_AsString(codes);
    if (out == NULL) goto done;
    const uint8_t *line = data;
    for (Py_ssize_t i = 0; i < lines; i++) {
        const uint8_t *nl = memchr(line, '\n', (size_t)(end - line));
        const uint8_t *line_end = nl ? nl : end;
        const uint8_t *path = NULL;
        Py_ssize_t path_len = 0;
        int kind = classify(line, line_end, &path, &path_len, &allowed);
        if (kind == ADD || kind == REMOVE) {
            PyObject *s = PyUnicode_DecodeUTF8((const char *)path, path_len, "strict");
            if (s == NULL) {
                PyErr_Clear(); /* validated above; should it fail, the pure path decides */
                kind = OTHER;
            } else {
                int failed = PyList_Append(paths, s);
                Py_DECREF(s);
                if (failed) goto done;
            }
        }
        out[i] = (char)kind;
        line = line_end + 1;
    }
    result = PyTuple_Pack(2, codes, paths);
done:
    Py_XDECREF(codes);
    Py_XDECREF(paths);
    PyBuffer_Release(&buf);
    return result;
}

static PyMethodDef methods[] = {
    {"scan", log_lines_scan, METH_VARARGS, "Classify each line of a block of commit lines; see deltalog/replay/commit_stream.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_log_lines", NULL, -1, methods};

PyMODINIT_FUNC PyInit__log_lines(void) {
    PyObject *m = PyModule_Create(&module);
    /* scan takes the table's partition-value keys (a build without them: the caller goes without it) */
    if (m != NULL && PyModule_AddIntConstant(m, "PARTITION_KEYS", 1) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
