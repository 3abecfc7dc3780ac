/* simulator._steprows: the full step log's spans expanded into rows, in C.
 *
 * ``expand(spans, ends, openings) -> bytes`` does what ``StepLog._expand_numpy``
 * (simulator/steplog.py) does with numpy, in one pass over the rows: ``spans`` is the
 * packed span records (``_SPAN``: 14 fields of 8 bytes), ``ends`` each row's end time (a
 * list of floats), ``openings`` the spans' KV block openings, one cycle a span (a list of
 * ints). The result is the ten step-log columns (``_COLUMNS``, every one 8 bytes a row:
 * doubles for start_s, end_s and prefill_attn_work, 64-bit ints for the others), one
 * after another, each ``len(ends)`` rows long.
 *
 * Built beside the mypyc modules by ``python -m simulator.build_accel`` and loaded only
 * from that build (simulator/accel.py); without it the numpy path runs. Integer sums are
 * exact and doubles are copied, never computed, so both paths give the same bits
 * (tests/test_steprows.py).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* A span record's fields, in _SPAN_FIELDS order. */
typedef struct {
    double start;
    int64_t n, prefill;
    double work;
    int64_t seqs, context, rows, running, waiting, last_running, last_waiting, kv, last_kv,
        cycle;
} Span;

enum { COLUMNS = 10 };

static PyObject *expand(PyObject *self, PyObject *args) {
    Py_buffer spans;
    PyObject *ends, *openings;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*O!O!", &spans, &PyList_Type, &ends, &PyList_Type,
                          &openings))
        return NULL;
    PyObject *out = NULL;
    int64_t *opened = NULL;
    if (spans.len % (Py_ssize_t)sizeof(Span) != 0) {
        PyErr_SetString(PyExc_ValueError, "expand: spans is not a whole number of records");
        goto done;
    }
    const Span *span = (const Span *)spans.buf;
    Py_ssize_t count = spans.len / (Py_ssize_t)sizeof(Span);
    Py_ssize_t total = PyList_GET_SIZE(ends), cycles = PyList_GET_SIZE(openings);
    Py_ssize_t rows = 0, cycled = 0;
    for (Py_ssize_t s = 0; s < count; s++) {
        if (span[s].n < 1 || span[s].cycle < 0) {
            PyErr_SetString(PyExc_ValueError, "expand: a span has no rows or a negative cycle");
            goto done;
        }
        rows += (Py_ssize_t)span[s].n;
        cycled += (Py_ssize_t)span[s].cycle;
    }
    if (rows != total || cycled != cycles) {
        PyErr_Format(PyExc_ValueError, "expand: the spans hold %zd rows and %zd openings; "
                     "given %zd ends and %zd openings", rows, cycled, total, cycles);
        goto done;
    }
    opened = PyMem_Malloc(sizeof(int64_t) * (size_t)(cycles ? cycles : 1));
    if (opened == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < cycles; i++) {
        long long v = PyLong_AsLongLong(PyList_GET_ITEM(openings, i));
        if (v == -1 && PyErr_Occurred())
            goto done;
        opened[i] = (int64_t)v;
    }
    out = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(sizeof(double) * COLUMNS) * total);
    if (out == NULL)
        goto done;
    char *base = PyBytes_AS_STRING(out);
    double *start_s = (double *)base, *end_s = start_s + total;
    int64_t *prefill = (int64_t *)(end_s + total);
    double *work = (double *)(prefill + total);
    int64_t *seqs = (int64_t *)(work + total), *context = seqs + total,
            *tokens = context + total, *running = tokens + total, *waiting = running + total,
            *kv = waiting + total;
    Py_ssize_t r = 0, at = 0;
    double previous_end = 0.0;
    for (Py_ssize_t s = 0; s < count; s++) {
        const Span *sp = &span[s];
        int64_t blocks = sp->kv;
        for (int64_t j = 0; j < sp->n; j++, r++) {
            double end = PyFloat_AsDouble(PyList_GET_ITEM(ends, r));
            if (end == -1.0 && PyErr_Occurred()) {
                Py_CLEAR(out);
                goto done;
            }
            end_s[r] = end;
            start_s[r] = j == 0 ? sp->start : previous_end;
            previous_end = end;
            prefill[r] = j == 0 ? sp->prefill : 0;
            work[r] = j == 0 ? sp->work : 0.0;
            seqs[r] = j == 0 ? sp->seqs : sp->rows;
            context[r] = sp->context + j * sp->rows;
            tokens[r] = sp->rows;
            if (j > 0 && sp->cycle > 0)  /* the opening of the step before this row */
                blocks += opened[at + (j - 1) % sp->cycle];
            if (j == sp->n - 1) {
                running[r] = sp->last_running;
                waiting[r] = sp->last_waiting;
                kv[r] = sp->last_kv;
            } else {
                running[r] = sp->running;
                waiting[r] = sp->waiting;
                kv[r] = blocks;
            }
        }
        at += (Py_ssize_t)sp->cycle;
    }
done:
    PyMem_Free(opened);
    PyBuffer_Release(&spans);
    return out;
}

static PyMethodDef methods[] = {
    {"expand", expand, METH_VARARGS,
     "expand(spans, ends, openings) -> bytes: the step log's ten columns, one after another"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "simulator._steprows",
    "The full step log's spans expanded into rows (simulator/steplog.py).", -1, methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__steprows(void) { return PyModule_Create(&module); }
