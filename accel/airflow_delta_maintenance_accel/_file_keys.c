/* Accelerator for airflow_delta_maintenance.deltalog.replay (reconcile._winners, through
 * file_keys.py): the newest action per file path in one hash pass.
 *
 * pyarrow's dictionary_encode, which the pure path uses, also copies every distinct path into a new
 * dictionary; reconciliation only needs, per distinct path, the largest action order. Keys are
 * compared byte for byte (the hash only chooses the slot), so the result is exact for any input.
 *
 * newest(chunks, won) -> number of distinct keys (all null paths count as one key)
 *   chunks: tuple of (offsets, data, valid, orders) per string array chunk:
 *     offsets: int32 or int64 buffer of rows + 1 absolute positions into data (see width),
 *     data: the chunk's value bytes, valid: uint8 per row or None (no nulls), orders: int64 per row;
 *   won: writable uint8 buffer, won[order] set to 1 for each key's largest order when it is >= 0.
 * The loop runs without the GIL.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

typedef struct {  /* 32 bytes: two per cache line */
    uint64_t hash;  /* 0: empty (hashes are made odd) */
    const uint8_t *key;
    int64_t len;
    int64_t best;
} Slot;

/* Rows are hashed a batch at a time and their slots prefetched before any is probed: the table is
 * far larger than the caches, and a probe that waits for each slot in turn spends most of its time
 * on memory latency (perf: 80% on the first slot load). */
#define BATCH 16

typedef struct {
    Py_buffer offsets, data, valid, orders;
    int width, has_valid;
    Py_ssize_t rows;
} Chunk;

static inline uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    h ^= h >> 33;
    return h;
}

/* Eight bytes at a time; the tail is read byte by byte so nothing past the key is touched. */
static uint64_t hash_bytes(const uint8_t *p, int64_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ mix(w)) * 0x100000001b3ULL;
    }
    uint64_t tail = 0;
    for (int s = 0; i < n; i++, s += 8) tail |= (uint64_t)p[i] << s;
    return mix(h ^ mix(tail));
}

static inline int64_t offset_at(const Chunk *c, Py_ssize_t r) {
    return c->width == 4 ? ((const int32_t *)c->offsets.buf)[r] : ((const int64_t *)c->offsets.buf)[r];
}

static void release_chunks(Chunk *c, Py_ssize_t n) {
    for (Py_ssize_t i = 0; i < n; i++) {
        if (c[i].offsets.obj) PyBuffer_Release(&c[i].offsets);
        if (c[i].data.obj) PyBuffer_Release(&c[i].data);
        if (c[i].valid.obj) PyBuffer_Release(&c[i].valid);
        if (c[i].orders.obj) PyBuffer_Release(&c[i].orders);
    }
    PyMem_Free(c);
}

static int take_chunk(PyObject *spec, Chunk *c) {
    PyObject *offsets, *data, *valid, *orders;
    if (!PyArg_ParseTuple(spec, "OiOOO", &offsets, &c->width, &data, &valid, &orders)) return 0;
    if (c->width != 4 && c->width != 8) { PyErr_SetString(PyExc_ValueError, "offset width must be 4 or 8"); return 0; }
    if (PyObject_GetBuffer(offsets, &c->offsets, PyBUF_C_CONTIGUOUS) < 0) return 0;
    if (PyObject_GetBuffer(data, &c->data, PyBUF_C_CONTIGUOUS) < 0) return 0;
    if (PyObject_GetBuffer(orders, &c->orders, PyBUF_C_CONTIGUOUS) < 0) return 0;
    c->rows = c->orders.len / 8;
    if (c->offsets.len != (c->rows + 1) * c->width) { PyErr_SetString(PyExc_ValueError, "offsets and orders disagree"); return 0; }
    c->has_valid = valid != Py_None;
    if (c->has_valid) {
        if (PyObject_GetBuffer(valid, &c->valid, PyBUF_C_CONTIGUOUS) < 0) return 0;
        if (c->valid.len != c->rows) { PyErr_SetString(PyExc_ValueError, "validity and orders disagree"); return 0; }
    }
    for (Py_ssize_t r = 0, prev = 0; r <= c->rows; r++) {
        int64_t o = offset_at(c, r);
        if (o < prev || o > c->data.len) { PyErr_SetString(PyExc_ValueError, "offsets out of range"); return 0; }
        prev = o;
    }
    return 1;
}

static PyObject *file_keys_newest(PyObject *self, PyObject *args) {
    PyObject *specs, *won_obj;
    if (!PyArg_ParseTuple(args, "O!O", &PyTuple_Type, &specs, &won_obj)) return NULL;
    Py_ssize_t nchunks = PyTuple_Size(specs);
    Chunk *chunks = PyMem_Calloc((size_t)(nchunks ? nchunks : 1), sizeof(Chunk));
    if (!chunks) return PyErr_NoMemory();
    Py_buffer won = {0};
    Slot *table = NULL;
    PyObject *result = NULL;
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < nchunks; i++) {
        if (!take_chunk(PyTuple_GetItem(specs, i), &chunks[i])) goto done;
        total += chunks[i].rows;
    }
    if (PyObject_GetBuffer(won_obj, &won, PyBUF_WRITABLE | PyBUF_C_CONTIGUOUS) < 0) goto done;
    size_t cap = 16;  /* at most 80% full, when every key is distinct */
    while (cap < (size_t)total + (size_t)total / 4) cap <<= 1;
    table = PyMem_Calloc(cap, sizeof(Slot));
    if (!table) { PyErr_NoMemory(); goto done; }
    int64_t distinct = 0, null_best = INT64_MIN, bad_order = INT64_MIN;
    uint8_t *marks = won.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < nchunks && bad_order == INT64_MIN; i++) {
        Chunk *c = &chunks[i];
        const uint8_t *data = c->data.buf;
        const int64_t *orders = c->orders.buf;
        const uint8_t *valid = c->has_valid ? c->valid.buf : NULL;
        for (Py_ssize_t r0 = 0; r0 < c->rows && bad_order == INT64_MIN; r0 += BATCH) {
            Py_ssize_t n = c->rows - r0 < BATCH ? c->rows - r0 : BATCH;
            uint64_t hashes[BATCH];
            for (Py_ssize_t j = 0; j < n; j++) {
                Py_ssize_t r = r0 + j;
                int64_t start = offset_at(c, r);
                hashes[j] = hash_bytes(data + start, offset_at(c, r + 1) - start) | 1;
                __builtin_prefetch(&table[hashes[j] & (cap - 1)], 1);
            }
            for (Py_ssize_t j = 0; j < n; j++) {
                Py_ssize_t r = r0 + j;
                int64_t order = orders[r];
                if (order >= won.len) { bad_order = order; break; }
                if (valid && !valid[r]) {
                    if (null_best == INT64_MIN) distinct++;
                    if (order > null_best) null_best = order;
                    continue;
                }
                int64_t start = offset_at(c, r);
                const uint8_t *key = data + start;
                int64_t len = offset_at(c, r + 1) - start;
                uint64_t h = hashes[j];
                size_t at = (size_t)h & (cap - 1);
                for (;;) {
                    Slot *s = &table[at];
                    if (!s->hash) {
                        s->hash = h; s->key = key; s->len = len; s->best = order;
                        distinct++;
                        break;
                    }
                    if (s->hash == h && s->len == len && memcmp(s->key, key, (size_t)len) == 0) {
                        if (order > s->best) s->best = order;
                        break;
                    }
                    at = (at + 1) & (cap - 1);
                }
            }
        }
    }
    if (bad_order == INT64_MIN) {
        for (size_t at = 0; at < cap; at++)
            if (table[at].hash && table[at].best >= 0) marks[table[at].best] = 1;
        if (null_best >= 0) marks[null_best] = 1;
    }
    Py_END_ALLOW_THREADS
    if (bad_order != INT64_MIN) { PyErr_Format(PyExc_ValueError, "order %lld beyond the won buffer", (long long)bad_order); goto done; }
    result = PyLong_FromLongLong(distinct);
done:
    PyMem_Free(table);
    if (won.obj) PyBuffer_Release(&won);
    release_chunks(chunks, nchunks);
    return result;
}

static PyMethodDef methods[] = {
    {"newest", file_keys_newest, METH_VARARGS, "Mark the largest order per distinct key; see deltalog/replay/file_keys.py."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_file_keys", NULL, -1, methods};

PyMODINIT_FUNC PyInit__file_keys(void) { return PyModule_Create(&module); }
