/* The one compiled step of rendering: a point's JSON array of objects from a table of texts.
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

static PyMethodDef methods[] = {
    {"rows", rows, METH_VARARGS, rows_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pointcast._render",
    "The compiled rendering of products.base.Records.", -1, methods,
};

PyMODINIT_FUNC
PyInit__render(void)
{
    return PyModule_Create(&module);
}
