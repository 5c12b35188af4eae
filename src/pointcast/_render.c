/* The one compiled step of rendering: a point's JSON array from a table of texts.
 *
 * products.base.Records keeps every distinct text of its columns (with its key in front) in
 * one buffer, ``blob``, text k being blob[offsets[k]:offsets[k + 1]], and for every point the
 * indices of its texts in order, ``picks``. A point's file is then ``before``, the picked
 * texts and ``after``, copied into one new bytes object. In Python this was a gather into an
 * object array, a list and a join: three passes over tens of thousands of objects a file,
 * each touching its reference count, a fifth of a build's time.
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

PyDoc_STRVAR(gather_doc,
"gather(blob, offsets, picks, before, after) -> bytes\n\n"
"before + b''.join(blob[offsets[k]:offsets[k + 1]] for k in picks) + after.\n"
"offsets: contiguous int64, ascending, from 0 to len(blob); picks: contiguous int32.");

static PyObject *
gather(PyObject *self, PyObject *args)
{
    PyObject *blob_obj, *offsets_obj, *picks_obj, *out = NULL;
    Py_buffer blob, offsets, picks, before, after;
    if (!PyArg_ParseTuple(args, "OOOy*y*", &blob_obj, &offsets_obj, &picks_obj, &before, &after))
        return NULL;
    if (get_buffer(blob_obj, &blob, 1, "blob") < 0)
        goto release_ends;
    if (get_buffer(offsets_obj, &offsets, 8, "offsets") < 0)
        goto release_blob;
    if (get_buffer(picks_obj, &picks, 4, "picks") < 0)
        goto release_offsets;

    const int64_t *off = offsets.buf;
    const int32_t *pick = picks.buf;
    const Py_ssize_t n_texts = offsets.len / 8 - 1, n_picks = picks.len / 4;
    if (n_texts < 0 || off[0] != 0 || off[n_texts] != blob.len) {
        PyErr_SetString(PyExc_ValueError, "offsets must run from 0 to len(blob)");
        goto release_all;
    }
    Py_ssize_t size = before.len + after.len;
    for (Py_ssize_t i = 0; i < n_picks; i++) {
        int32_t k = pick[i];
        if (k < 0 || k >= n_texts) {
            PyErr_Format(PyExc_IndexError, "pick %d outside the %zd texts", (int)k, n_texts);
            goto release_all;
        }
        if (off[k] < 0 || off[k + 1] < off[k] || off[k + 1] > blob.len) {
            PyErr_SetString(PyExc_ValueError, "offsets must ascend within the blob");
            goto release_all;
        }
        size += off[k + 1] - off[k];
    }
    out = PyBytes_FromStringAndSize(NULL, size);
    if (out == NULL)
        goto release_all;
    char *dst = PyBytes_AS_STRING(out);
    const char *src = blob.buf;
    Py_BEGIN_ALLOW_THREADS
    memcpy(dst, before.buf, before.len);
    dst += before.len;
    for (Py_ssize_t i = 0; i < n_picks; i++) {
        const int64_t start = off[pick[i]], len = off[pick[i] + 1] - start;
        memcpy(dst, src + start, len);
        dst += len;
    }
    memcpy(dst, after.buf, after.len);
    Py_END_ALLOW_THREADS

release_all:
    PyBuffer_Release(&picks);
release_offsets:
    PyBuffer_Release(&offsets);
release_blob:
    PyBuffer_Release(&blob);
release_ends:
    PyBuffer_Release(&before);
    PyBuffer_Release(&after);
    return out;
}

static PyMethodDef methods[] = {
    {"gather", gather, METH_VARARGS, gather_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "pointcast._render",
    "The compiled gather of products.base.Records.", -1, methods,
};

PyMODINIT_FUNC
PyInit__render(void)
{
    return PyModule_Create(&module);
}
