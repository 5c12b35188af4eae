/* The compiled steps of rendering: the codes of numbers, and a point's JSON array of objects
 * from a table of texts.
 *
 * products.base.Records keeps every distinct text of its columns (with its key in front) in
 * one buffer, ``blob``, text k being blob[starts[k]:starts[k + 1]]; column c's texts begin
 * at text offsets[c], and its indices say which of them each row (and point) takes. A point's
 * file is ``before``, its rows (each the texts of every column) joined by ``separator``, then
 * ``after``, copied into one new bytes object. In Python this was a gather into an object
 * array, a list and a join (three passes over tens of thousands of objects a file, each
 * touching its reference count) from an array of every point's picks, a fifth of a build.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static int
get_buffer(PyObject *obj, Py_buffer *view, Py_ssize_t itemsize, const char *what)
{
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS) < 0)
        return -1;
    if (view->itemsize != itemsize || view->len % itemsize) {
        PyErr_Format(PyExc_TypeError, "%s: expected items of %zd bytes, got %zd",
                     what, itemsize, view->itemsize);
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

PyDoc_STRVAR(rows_doc,
"rows(blob, starts, columns, offsets, j, before, separator, after) -> bytes\n\n"
"before + separator.join(b''.join(text(offsets[c] + index(c, r)) for c in columns)\n"
"                        for r in rows) + after,\n"
"where text(k) is blob[starts[k]:starts[k + 1]] and index(c, r) is columns[c][r] for a\n"
"1-D column (shared by every point) or columns[c][j, r] for a 2-D one (point, row).\n"
"starts: contiguous int64 ascending from 0 to len(blob); columns: contiguous int32;\n"
"offsets: one int64 a column.");

static PyObject *
rows(PyObject *self, PyObject *args)
{
    PyObject *blob_obj, *starts_obj, *columns_obj, *offsets_obj, *seq = NULL, *out = NULL;
    Py_ssize_t j, n_cols = 0, got = 0, n_rows = -1;
    Py_buffer blob = {0}, starts = {0}, offsets = {0}, before, separator, after;
    Py_buffer *cols = NULL;
    const int32_t **index = NULL;
    int64_t *picks = NULL;

    if (!PyArg_ParseTuple(args, "OOOOny*y*y*", &blob_obj, &starts_obj, &columns_obj,
                          &offsets_obj, &j, &before, &separator, &after))
        return NULL;
    if (get_buffer(blob_obj, &blob, 1, "blob") < 0)
        goto done;
    if (get_buffer(starts_obj, &starts, 8, "starts") < 0)
        goto done;
    if (get_buffer(offsets_obj, &offsets, 8, "offsets") < 0)
        goto done;
    seq = PySequence_Fast(columns_obj, "columns must be a sequence");
    if (seq == NULL)
        goto done;
    n_cols = PySequence_Fast_GET_SIZE(seq);
    if (offsets.len / 8 != n_cols) {
        PyErr_SetString(PyExc_ValueError, "one offset a column");
        goto done;
    }
    cols = PyMem_Calloc(n_cols ? n_cols : 1, sizeof(Py_buffer));
    index = PyMem_Calloc(n_cols ? n_cols : 1, sizeof(int32_t *));
    if (cols == NULL || index == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (; got < n_cols; got++) {
        Py_buffer *col = &cols[got];
        if (get_buffer(PySequence_Fast_GET_ITEM(seq, got), col, 4, "column") < 0)
            goto done;
        Py_ssize_t r;
        if (col->ndim == 1) {
            r = col->shape[0];
            index[got] = col->buf;
        } else if (col->ndim == 2) {
            if (j < 0 || j >= col->shape[0]) {
                PyErr_Format(PyExc_IndexError, "point %zd outside the %zd points", j, col->shape[0]);
                got++;
                goto done;
            }
            r = col->shape[1];
            index[got] = (const int32_t *)col->buf + j * r;
        } else {
            PyErr_SetString(PyExc_ValueError, "a column is 1-D (row) or 2-D (point, row)");
            got++;
            goto done;
        }
        if (n_rows >= 0 && r != n_rows) {
            PyErr_SetString(PyExc_ValueError, "the columns have different numbers of rows");
            got++;
            goto done;
        }
        n_rows = r;
    }
    if (n_rows < 0)
        n_rows = 0;

    const int64_t *at = starts.buf, *first = offsets.buf;
    const Py_ssize_t n_texts = starts.len / 8 - 1;
    if (n_texts < 0 || at[0] != 0 || at[n_texts] != blob.len) {
        PyErr_SetString(PyExc_ValueError, "starts must run from 0 to len(blob)");
        goto done;
    }
    /* The point's texts in file order, found column by column (each column's indices of the
     * point are contiguous), then copied row by row from this list. */
    picks = PyMem_Malloc((n_rows * n_cols > 0 ? n_rows * n_cols : 1) * sizeof(int64_t));
    if (picks == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t size = before.len + after.len + (n_rows > 1 ? (n_rows - 1) * separator.len : 0);
    for (Py_ssize_t c = 0; c < n_cols; c++) {
        const int32_t *column = index[c];
        const int64_t offset = first[c];
        for (Py_ssize_t r = 0; r < n_rows; r++) {
            const int64_t k = offset + column[r];
            if (k < 0 || k >= n_texts || at[k] < 0 || at[k + 1] < at[k] || at[k + 1] > blob.len) {
                PyErr_Format(PyExc_IndexError, "row %zd of column %zd: no text %lld", r, c,
                             (long long)k);
                goto done;
            }
            size += at[k + 1] - at[k];
            picks[r * n_cols + c] = k;
        }
    }
    out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL)
        goto done;
    char *dst = PyBytes_AS_STRING(out);
    const char *src = blob.buf;
    Py_BEGIN_ALLOW_THREADS
    memcpy(dst, before.buf, before.len);
    dst += before.len;
    for (Py_ssize_t r = 0; r < n_rows; r++) {
        if (r) {
            memcpy(dst, separator.buf, separator.len);
            dst += separator.len;
        }
        for (const int64_t *k = picks + r * n_cols, *end = k + n_cols; k < end; k++) {
            const int64_t len = at[*k + 1] - at[*k];
            memcpy(dst, src + at[*k], len);
            dst += len;
        }
    }
    memcpy(dst, after.buf, after.len);
    Py_END_ALLOW_THREADS

done:
    for (Py_ssize_t c = 0; c < got; c++)
        PyBuffer_Release(&cols[c]);
    PyMem_Free(cols);
    PyMem_Free(index);
    PyMem_Free(picks);
    Py_XDECREF(seq);
    if (offsets.obj)
        PyBuffer_Release(&offsets);
    if (starts.obj)
        PyBuffer_Release(&starts);
    if (blob.obj)
        PyBuffer_Release(&blob);
    PyBuffer_Release(&before);
    PyBuffer_Release(&separator);
    PyBuffer_Release(&after);
    return out;
}

/* products.base.numbers: a value's code is its rounded value x 10**decimals (or the value
 * truncated, for integers), each value to the nearest text of a table of the distinct codes.
 * In numpy that was a dozen passes over the array (finite, scale, near-tie, rint, cast, min,
 * max, a table, its scatter and gather, a transposing copy): this is two. The arithmetic is
 * numpy's, operation for operation: x * scale, rint (round half even), a cast that gives
 * INT64_MIN out of range as numpy's does on x86-64. */

PyDoc_STRVAR(codes_doc,
"codes(values, out, scale, truncate) -> (lo, hi, ties)\n\n"
"out[i] = rint(values[i] * scale), or trunc(values[i]) when truncate, as int64 (0 where a\n"
"value is not finite); lo, hi: the least and greatest code of a finite value (0, 0 if none);\n"
"ties: the positions (unless truncate) whose scaled value is within 1e-6 of a tie, for the\n"
"caller to round as Python does. values: contiguous float64; out: contiguous int64.");

static PyObject *
codes(PyObject *self, PyObject *args)
{
    PyObject *values_obj, *out_obj, *ties = NULL, *result = NULL;
    double scale;
    int truncate;
    Py_buffer values = {0}, out = {0};
    Py_ssize_t *near = NULL, n_near = 0;

    if (!PyArg_ParseTuple(args, "OOdp", &values_obj, &out_obj, &scale, &truncate))
        return NULL;
    if (get_buffer(values_obj, &values, 8, "values") < 0)
        goto done;
    if (PyObject_GetBuffer(out_obj, &out, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto done;
    if (out.itemsize != 8 || out.len != values.len) {
        PyErr_SetString(PyExc_ValueError, "out: one int64 a value");
        goto done;
    }
    const Py_ssize_t n = values.len / 8;
    const double *v = values.buf;
    int64_t *c = out.buf, lo = INT64_MAX, hi = INT64_MIN;
    int failed = 0;
    Py_BEGIN_ALLOW_THREADS
    Py_ssize_t room = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const double x = v[i];
        if (!isfinite(x)) {
            c[i] = 0;
            continue;
        }
        double s;
        if (truncate) {
            s = trunc(x);
        } else {
            s = x * scale;
            if (fabs(fabs(s - trunc(s)) - 0.5) < 1e-6) {
                if (n_near == room) {
                    room = room ? 2 * room : 64;
                    Py_ssize_t *grown = PyMem_RawRealloc(near, room * sizeof(Py_ssize_t));
                    if (grown == NULL) {
                        failed = 1;
                        break;
                    }
                    near = grown;
                }
                near[n_near++] = i;
            }
            s = rint(s);
        }
        const int64_t k = fabs(s) < 0x1p63 ? (int64_t)s : INT64_MIN;
        c[i] = k;
        lo = k < lo ? k : lo;
        hi = k > hi ? k : hi;
    }
    Py_END_ALLOW_THREADS
    if (failed) {
        PyErr_NoMemory();
        goto done;
    }
    if (lo > hi)
        lo = hi = 0;
    ties = PyList_New(n_near);
    if (ties == NULL)
        goto done;
    for (Py_ssize_t t = 0; t < n_near; t++) {
        PyObject *at = PyLong_FromSsize_t(near[t]);
        if (at == NULL)
            goto done;
        PyList_SET_ITEM(ties, t, at);
    }
    result = Py_BuildValue("LLO", (long long)lo, (long long)hi, ties);

done:
    PyMem_RawFree(near);
    Py_XDECREF(ties);
    if (out.obj)
        PyBuffer_Release(&out);
    if (values.obj)
        PyBuffer_Release(&values);
    return result;
}

PyDoc_STRVAR(table_index_doc,
"table_index(values, codes, lo, hi, index) -> bytes\n\n"
"The distinct codes of the finite values (ascending int64, as bytes), and in index, for\n"
"each value, the position of its code among them (their number where a value is not\n"
"finite). values, codes (from codes(); a finite value's within lo .. hi, less than\n"
"2**31 - 1 codes apart): contiguous, 1-D or 2-D (time, point); index: contiguous int32 of\n"
"the transposed shape (point, time), so that a point's indices are contiguous.");

static PyObject *
table_index(PyObject *self, PyObject *args)
{
    PyObject *values_obj, *codes_obj, *index_obj, *result = NULL;
    long long lo_arg, hi_arg;
    Py_buffer values = {0}, codes_buf = {0}, index = {0};
    int32_t *slot = NULL;

    if (!PyArg_ParseTuple(args, "OOLLO", &values_obj, &codes_obj, &lo_arg, &hi_arg, &index_obj))
        return NULL;
    if (get_buffer(values_obj, &values, 8, "values") < 0)
        goto done;
    if (get_buffer(codes_obj, &codes_buf, 8, "codes") < 0)
        goto done;
    if (PyObject_GetBuffer(index_obj, &index, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto done;
    if (values.ndim < 1 || values.ndim > 2 || codes_buf.len != values.len
        || index.itemsize != 4 || index.len / 4 != values.len / 8) {
        PyErr_SetString(PyExc_ValueError,
                        "values 1-D or 2-D, codes one int64 and index one int32 a value");
        goto done;
    }
    const Py_ssize_t n = values.len / 8;
    const Py_ssize_t rows = values.shape[0], cols = values.ndim == 2 ? values.shape[1] : 1;
    const double *v = values.buf;
    const int64_t *c = codes_buf.buf, lo = lo_arg;
    if (hi_arg < lo_arg || (uint64_t)hi_arg - (uint64_t)lo_arg > INT32_MAX - 1) {
        PyErr_SetString(PyExc_ValueError, "lo .. hi must span less than 2**31 - 1 codes");
        goto done;
    }
    const Py_ssize_t span = (Py_ssize_t)(hi_arg - lo_arg) + 1;
    slot = PyMem_Calloc(span, sizeof(int32_t));
    if (slot == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (isfinite(v[i])) {
            if (c[i] < lo || c[i] - lo >= span) {
                PyErr_Format(PyExc_ValueError, "code %lld of value %zd outside %lld .. %lld",
                             (long long)c[i], i, lo_arg, hi_arg);
                goto done;
            }
            slot[c[i] - lo] = 1;
        }
    }
    int32_t distinct = 0;
    for (Py_ssize_t k = 0; k < span; k++)
        if (slot[k])
            slot[k] = ++distinct;  /* position + 1 */
    result = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)distinct * 8);
    if (result == NULL)
        goto done;
    int64_t *table = (int64_t *)PyBytes_AS_STRING(result);
    for (Py_ssize_t k = 0; k < span; k++)
        if (slot[k])
            table[slot[k] - 1] = lo + k;
    int32_t *dst = index.buf;
    Py_BEGIN_ALLOW_THREADS
    /* (time, point) -> (point, time) in bands of 16 times: each point's 16 indices are one
     * cache line written, the band's rows stay in the cache while its points are read. */
    for (Py_ssize_t r0 = 0; r0 < rows; r0 += 16) {
        const Py_ssize_t r1 = r0 + 16 < rows ? r0 + 16 : rows;
        for (Py_ssize_t j = 0; j < cols; j++)
            for (Py_ssize_t r = r0; r < r1; r++) {
                const Py_ssize_t i = r * cols + j;
                dst[j * rows + r] = isfinite(v[i]) ? slot[c[i] - lo] - 1 : distinct;
            }
    }
    Py_END_ALLOW_THREADS

done:
    PyMem_Free(slot);
    if (index.obj)
        PyBuffer_Release(&index);
    if (codes_buf.obj)
        PyBuffer_Release(&codes_buf);
    if (values.obj)
        PyBuffer_Release(&values);
    return result;
}

static PyMethodDef methods[] = {
    {"rows", rows, METH_VARARGS, rows_doc},
    {"codes", codes, METH_VARARGS, codes_doc},
    {"table_index", table_index, METH_VARARGS, table_index_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pointcast._render",
    "The compiled steps of rendering (products.base).", -1, methods,
};

PyMODINIT_FUNC
PyInit__render(void)
{
    return PyModule_Create(&module);
}
