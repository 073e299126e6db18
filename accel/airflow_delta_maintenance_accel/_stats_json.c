/* Accelerator for airflow_delta_maintenance.deltalog.stats (parsed_columns, through fast_stats.py):
 * reads ``add.stats`` JSON objects into Arrow-shaped buffers that Python allocated (one validity
 * byte per row per field; int64, double, float, string-view or byte values), for the plain form
 * writers produce.
 *
 * Exactness rule: a row is either read completely and exactly as pyarrow's JSON reader would read
 * it, or it is *flagged* and left for pyarrow. Anything outside the plain subset flags the row:
 * escapes, invalid UTF-8, duplicate keys, a number that is not a plain JSON integer where an
 * integer is declared, a value out of the declared range, a non-finite float, a float that needs
 * more than the exact fast path and strtod, a type other than the declared one, trailing bytes,
 * nesting deeper than MAX_DEPTH. Unknown keys are skipped (pyarrow's "ignore"), their values
 * checked for JSON grammar. So the result never depends on this module, only the speed does.
 *
 * The parse runs without the GIL: all buffers are acquired before and released after.
 */
#define PY_SSIZE_T_CLEAN
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <Python.h>
#include <locale.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { K_STRUCT = 0, K_INT = 1, K_F64 = 2, K_F32 = 3, K_STR = 4, K_BOOL = 5 };
#define MAX_DEPTH 64

typedef struct Node {
    const char *name;
    Py_ssize_t name_len;
    int kind;
    int64_t lo, hi;        /* K_INT: the declared type's range */
    uint8_t *valid;        /* one byte per row; NULL for the root */
    void *values;          /* per kind; NULL for structs */
    int64_t seen_row;      /* duplicate-key detection */
    int nchildren;
    int hint;              /* the child expected next (writers keep one key order) */
    struct Node *children;
} Node;

typedef struct {
    const uint8_t *base;   /* the data buffer: string views point into it */
    const uint8_t *p, *end;
    int64_t row;
    int depth;
} Cursor;

static locale_t c_locale;

/* ---------------------------------------------------------------- scanning helpers */

static inline void skip_ws(Cursor *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\n' || *c->p == '\r' || *c->p == '\t')) c->p++;
}

/* Length of a valid UTF-8 sequence starting at p (lead byte >= 0x80), or 0 if invalid. */
static inline int utf8_len(const uint8_t *p, const uint8_t *end) {
    uint8_t b = p[0];
    int n;
    uint32_t cp;
    if (b >= 0xC2 && b <= 0xDF) { n = 2; cp = b & 0x1F; }
    else if (b >= 0xE0 && b <= 0xEF) { n = 3; cp = b & 0x0F; }
    else if (b >= 0xF0 && b <= 0xF4) { n = 4; cp = b & 0x07; }
    else return 0;
    if (end - p < n) return 0;
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF))) return 0;
    return n;
}

/* A string without escapes at c->p (after the opening quote was seen): sets *s and *len, moves past
 * the closing quote. 0 when it has an escape, a control character or invalid UTF-8. */
static int plain_string(Cursor *c, const uint8_t **s, Py_ssize_t *len) {
    const uint8_t *start = ++c->p;
    while (c->p < c->end) {
        uint8_t b = *c->p;
        if (b == '"') {
            *s = start;
            *len = c->p - start;
            c->p++;
            return 1;
        }
        if (b == '\\' || b < 0x20) return 0;
        if (b >= 0x80) {
            int n = utf8_len(c->p, c->end);
            if (!n) return 0;
            c->p += n;
        } else {
            c->p++;
        }
    }
    return 0;
}

/* The extent of a JSON number token at c->p, checked against the grammar
 * -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?; 0 if it is not one. */
static int number_token(Cursor *c, const uint8_t **s, Py_ssize_t *len, int *is_integer) {
    const uint8_t *p = c->p, *e = c->end, *start = p;
    *is_integer = 1;
    if (p < e && *p == '-') p++;
    if (p >= e) return 0;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') { while (p < e && *p >= '0' && *p <= '9') p++; }
    else return 0;
    if (p < e && *p == '.') {
        *is_integer = 0;
        p++;
        if (p >= e || *p < '0' || *p > '9') return 0;
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        *is_integer = 0;
        p++;
        if (p < e && (*p == '+' || *p == '-')) p++;
        if (p >= e || *p < '0' || *p > '9') return 0;
        while (p < e && *p >= '0' && *p <= '9') p++;
    }
    *s = start;
    *len = p - start;
    c->p = p;
    return 1;
}

static int literal(Cursor *c, const char *word, Py_ssize_t n) {
    if (c->end - c->p < n || memcmp(c->p, word, (size_t)n) != 0) return 0;
    c->p += n;
    return 1;
}

static int to_double(const uint8_t *s, Py_ssize_t len, double *out);

/* Skips one JSON value of a key nobody declared, checking its grammar. */
static int skip_value(Cursor *c) {
    const uint8_t *s;
    Py_ssize_t len;
    int is_int;
    skip_ws(c);
    if (c->p >= c->end) return 0;
    switch (*c->p) {
    case '"': return plain_string(c, &s, &len);
    case 't': return literal(c, "true", 4);
    case 'f': return literal(c, "false", 5);
    case 'n': return literal(c, "null", 4);
    case '{':
    case '[': {
        int object = *c->p == '{';
        uint8_t close = object ? '}' : ']';
        if (++c->depth > MAX_DEPTH) return 0;
        c->p++;
        skip_ws(c);
        if (c->p < c->end && *c->p == close) { c->p++; c->depth--; return 1; }
        for (;;) {
            if (object) {
                skip_ws(c);
                if (c->p >= c->end || *c->p != '"' || !plain_string(c, &s, &len)) return 0;
                skip_ws(c);
                if (c->p >= c->end || *c->p != ':') return 0;
                c->p++;
            }
            if (!skip_value(c)) return 0;
            skip_ws(c);
            if (c->p >= c->end) return 0;
            if (*c->p == ',') { c->p++; continue; }
            if (*c->p == close) { c->p++; c->depth--; return 1; }
            return 0;
        }
    }
    default: {
        /* pyarrow refuses a number beyond a double's range even under a key it ignores */
        double ignored;
        return number_token(c, &s, &len, &is_int) && to_double(s, len, &ignored);
    }
    }
}

/* ---------------------------------------------------------------- numbers */

static const double POW10[] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
                               1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* A decimal number → double, correctly rounded. Clinger's fast path (significand below 2^53 and a
 * power of ten within 10^22, both exact, so one IEEE operation rounds once); strtod_l otherwise. */
static int to_double(const uint8_t *s, Py_ssize_t len, double *out) {
    const uint8_t *p = s, *e = s + len;
    int neg = 0, digits = 0;
    uint64_t m = 0;
    int64_t exp10 = 0;
    if (*p == '-') { neg = 1; p++; }
    for (; p < e && *p >= '0' && *p <= '9'; p++) {
        if (m || *p != '0') digits++;
        if (digits <= 19) m = m * 10 + (uint64_t)(*p - '0'); else exp10++;
    }
    if (p < e && *p == '.') {
        for (p++; p < e && *p >= '0' && *p <= '9'; p++) {
            if (m || *p != '0') digits++;
            if (digits <= 19) { m = m * 10 + (uint64_t)(*p - '0'); exp10--; }
        }
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        int eneg = 0;
        int64_t ev = 0;
        p++;
        if (*p == '+' || *p == '-') { eneg = *p == '-'; p++; }
        for (; p < e && *p >= '0' && *p <= '9'; p++) if (ev < 100000) ev = ev * 10 + (*p - '0');
        exp10 += eneg ? -ev : ev;
    }
    if (digits <= 19 && m <= (1ULL << 53) && exp10 >= -22 && exp10 <= 22) {
        double v = (double)m;
        v = exp10 < 0 ? v / POW10[-exp10] : v * POW10[exp10];
        *out = neg ? -v : v;
        return 1;
    }
    char buf[128];
    if (len >= (Py_ssize_t)sizeof buf) return 0;
    memcpy(buf, s, (size_t)len);
    buf[len] = 0;
    char *stop;
    double v = strtod_l(buf, &stop, c_locale);
    if (stop != buf + len || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

static int to_float(const uint8_t *s, Py_ssize_t len, float *out) {
    char buf[128];
    if (len >= (Py_ssize_t)sizeof buf) return 0;
    memcpy(buf, s, (size_t)len);
    buf[len] = 0;
    char *stop;
    float v = strtof_l(buf, &stop, c_locale);  /* rounded once, straight to float */
    if (stop != buf + len || !isfinite(v)) return 0;
    *out = v;
    return 1;
}

static int to_int(const uint8_t *s, Py_ssize_t len, int64_t lo, int64_t hi, int64_t *out) {
    const uint8_t *p = s, *e = s + len;
    int neg = 0;
    uint64_t v = 0;
    if (*p == '-') { neg = 1; p++; }
    if (e - p > 19) return 0;
    for (; p < e; p++) v = v * 10 + (uint64_t)(*p - '0');  /* at most 19 digits: no wrap */
    if (neg) {
        if (v == 0 || v > (uint64_t)INT64_MAX + 1) return 0;  /* "-0" is left to pyarrow */
        *out = v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v;
    } else {
        if (v > (uint64_t)INT64_MAX) return 0;
        *out = (int64_t)v;
    }
    return *out >= lo && *out <= hi;
}

/* ---------------------------------------------------------------- values */

static int parse_object(Cursor *c, Node *node);

static void write_view(uint8_t *view, const uint8_t *base, const uint8_t *s, Py_ssize_t len) {
    int32_t n = (int32_t)len;
    memset(view, 0, 16);
    memcpy(view, &n, 4);
    if (n <= 12) {
        memcpy(view + 4, s, (size_t)n);
    } else {
        int32_t buffer_index = 0, offset = (int32_t)(s - base);
        memcpy(view + 4, s, 4);
        memcpy(view + 8, &buffer_index, 4);
        memcpy(view + 12, &offset, 4);
    }
}

static int parse_value(Cursor *c, Node *n) {
    const uint8_t *s;
    Py_ssize_t len;
    int is_int;
    int64_t row = c->row;
    skip_ws(c);
    if (c->p >= c->end) return 0;
    if (*c->p == 'n') return literal(c, "null", 4);  /* the field stays null */
    switch (n->kind) {
    case K_STRUCT:
        return *c->p == '{' && parse_object(c, n);
    case K_STR:
        if (*c->p != '"' || !plain_string(c, &s, &len)) return 0;
        write_view((uint8_t *)n->values + 16 * row, c->base, s, len);
        break;
    case K_BOOL:
        if (literal(c, "true", 4)) ((uint8_t *)n->values)[row] = 1;
        else if (literal(c, "false", 5)) ((uint8_t *)n->values)[row] = 0;
        else return 0;
        break;
    case K_INT:
        if (!number_token(c, &s, &len, &is_int) || !is_int) return 0;
        if (!to_int(s, len, n->lo, n->hi, (int64_t *)n->values + row)) return 0;
        break;
    case K_F64:
        if (!number_token(c, &s, &len, &is_int) || !to_double(s, len, (double *)n->values + row)) return 0;
        break;
    case K_F32:
        if (!number_token(c, &s, &len, &is_int) || !to_float(s, len, (float *)n->values + row)) return 0;
        break;
    default:
        return 0;
    }
    n->valid[row] = 1;
    return 1;
}

static Node *find_child(Node *node, const uint8_t *key, Py_ssize_t len) {
    int n = node->nchildren;
    for (int i = 0; i < n; i++) {
        int j = node->hint + i;
        if (j >= n) j -= n;
        Node *ch = &node->children[j];
        if (ch->name_len == len && memcmp(ch->name, key, (size_t)len) == 0) {
            node->hint = j + 1 < n ? j + 1 : 0;
            return ch;
        }
    }
    return NULL;
}

/* An object for `node` at c->p ('{'): its declared keys read, the others skipped. */
static int parse_object(Cursor *c, Node *node) {
    const uint8_t *key;
    Py_ssize_t len;
    if (++c->depth > MAX_DEPTH) return 0;
    c->p++;
    if (node->valid) node->valid[c->row] = 1;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') { c->p++; c->depth--; return 1; }
    for (;;) {
        skip_ws(c);
        if (c->p >= c->end || *c->p != '"' || !plain_string(c, &key, &len)) return 0;
        skip_ws(c);
        if (c->p >= c->end || *c->p != ':') return 0;
        c->p++;
        Node *ch = find_child(node, key, len);
        if (ch) {
            if (ch->seen_row == c->row) return 0;  /* a duplicate key: pyarrow decides */
            ch->seen_row = c->row;
            if (!parse_value(c, ch)) return 0;
        } else if (!skip_value(c)) {
            return 0;
        }
        skip_ws(c);
        if (c->p >= c->end) return 0;
        if (*c->p == ',') { c->p++; continue; }
        if (*c->p == '}') { c->p++; c->depth--; return 1; }
        return 0;
    }
}

/* Whether a row holds anything but whitespace: a flagged row must, or pyarrow's read of the flagged
 * rows could pair objects with the wrong rows. */
static int has_content(const uint8_t *p, const uint8_t *end) {
    for (; p < end; p++)
        if (!(*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) return 1;
    return 0;
}

/* ---------------------------------------------------------------- the spec from Python */

typedef struct {
    Py_buffer *views;
    int count, cap;
} Buffers;

static void release_all(Buffers *b) {
    for (int i = 0; i < b->count; i++) PyBuffer_Release(&b->views[i]);
    PyMem_Free(b->views);
}

static void *take_buffer(Buffers *b, PyObject *obj, Py_ssize_t need) {
    if (b->count == b->cap) {
        int cap = b->cap ? 2 * b->cap : 16;
        Py_buffer *v = PyMem_Realloc(b->views, (size_t)cap * sizeof(Py_buffer));
        if (!v) { PyErr_NoMemory(); return NULL; }
        b->views = v;
        b->cap = cap;
    }
    if (PyObject_GetBuffer(obj, &b->views[b->count], PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) return NULL;
    Py_buffer *view = &b->views[b->count++];
    if (view->len < need) {
        PyErr_SetString(PyExc_ValueError, "output buffer too small");
        return NULL;
    }
    return view->buf;
}

static void free_tree(Node *n) {
    for (int i = 0; i < n->nchildren; i++) free_tree(&n->children[i]);
    PyMem_Free(n->children);
}

/* Fills `node->children` from a tuple of (name: bytes, kind, valid, values, lo, hi, children). */
static int build_children(Node *node, PyObject *specs, Py_ssize_t rows, Buffers *bufs) {
    if (!PyTuple_Check(specs)) { PyErr_SetString(PyExc_TypeError, "children must be a tuple"); return 0; }
    Py_ssize_t n = PyTuple_Size(specs);
    node->nchildren = (int)n;
    node->hint = 0;
    node->children = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Node));
    if (!node->children) { PyErr_NoMemory(); return 0; }
    for (Py_ssize_t i = 0; i < n; i++) {
        Node *ch = &node->children[i];
        PyObject *name, *valid, *values, *children;
        long long lo, hi;
        ch->seen_row = -1;
        if (!PyArg_ParseTuple(PyTuple_GetItem(specs, i), "SiOOLLO", &name, &ch->kind, &valid, &values, &lo, &hi, &children)) return 0;
        ch->name = PyBytes_AsString(name);
        ch->name_len = PyBytes_Size(name);
        ch->lo = lo;
        ch->hi = hi;
        if (!(ch->valid = take_buffer(bufs, valid, rows))) return 0;
        static const int width[] = {0, 8, 8, 4, 16, 1};
        if (ch->kind < K_STRUCT || ch->kind > K_BOOL) { PyErr_SetString(PyExc_ValueError, "unknown kind"); return 0; }
        if (ch->kind != K_STRUCT && !(ch->values = take_buffer(bufs, values, rows * width[ch->kind]))) return 0;
        if (!build_children(ch, children, rows, bufs)) return 0;
    }
    return 1;
}

/* parse(data, offsets, spec, flags) -> number of flagged rows, or -1 if a flagged row is blank.
 * data: the rows' bytes; offsets: int64, rows + 1, into data; spec: the top-level fields as in
 * build_children; flags: uint8 per row, set to 1 where the row is left for pyarrow. */
static PyObject *stats_parse(PyObject *self, PyObject *args) {
    PyObject *data_obj, *offsets_obj, *spec, *flags_obj;
    if (!PyArg_ParseTuple(args, "OOOO", &data_obj, &offsets_obj, &spec, &flags_obj)) return NULL;
    Py_buffer data, offsets;
    if (PyObject_GetBuffer(data_obj, &data, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    if (PyObject_GetBuffer(offsets_obj, &offsets, PyBUF_C_CONTIGUOUS) < 0) { PyBuffer_Release(&data); return NULL; }
    Py_ssize_t rows = offsets.len / 8 - 1;
    Buffers bufs = {0};
    Node root = {0};
    PyObject *result = NULL;
    uint8_t *flags;
    if (rows < 0) { PyErr_SetString(PyExc_ValueError, "offsets must hold rows + 1 int64"); goto done; }
    if (!(flags = take_buffer(&bufs, flags_obj, rows))) goto done;
    if (!build_children(&root, spec, rows, &bufs)) goto done;
    const int64_t *off = offsets.buf;
    for (Py_ssize_t r = 0; r <= rows; r++) {
        if (off[r] < 0 || off[r] > data.len || (r && off[r] < off[r - 1])) { PyErr_SetString(PyExc_ValueError, "offsets out of range"); goto done; }
    }
    int64_t flagged = 0;
    Py_BEGIN_ALLOW_THREADS
    const uint8_t *base = data.buf;
    for (Py_ssize_t r = 0; r < rows; r++) {
        Cursor c = {base, base + off[r], base + off[r + 1], r, 0};
        skip_ws(&c);
        int ok = c.p < c.end && *c.p == '{' && parse_object(&c, &root);
        if (ok) { skip_ws(&c); ok = c.p == c.end; }
        flags[r] = !ok;
        if (!ok) {
            flagged++;
            if (!has_content(base + off[r], base + off[r + 1])) { flagged = -1; break; }
        }
    }
    Py_END_ALLOW_THREADS
    result = PyLong_FromLongLong(flagged);
done:
    free_tree(&root);
    release_all(&bufs);
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"parse", stats_parse, METH_VARARGS, "Read plain add.stats objects into caller-allocated buffers; see airflow_delta_maintenance/deltalog/stats/fast_stats.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_stats_json", NULL, -1, methods};

PyMODINIT_FUNC PyInit__stats_json(void) {
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (!c_locale) return PyErr_NoMemory();
    return PyModule_Create(&module);
}
