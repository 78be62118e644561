/* A kernel launch from Python without a binding's argument objects or a shared buffer.

   go = launcher(address of cuLaunchKernel or hipModuleLaunchKernel, function handle,
                 codes, offsets, size)
   err = go(gx, gy, gz, bx, by, bz, smem, stream, *values)

   Handles and pointers travel as Python ints; the result is the driver's error code. Both
   vendors' launch functions take the same C arguments. Built by backends/launch_stub.py with
   the host's C compiler; the runtimes' Python bindings stay the fallback where it cannot be. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <string.h>

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned smem, void *stream, void **params, void **extra);

/* The arguments are packed on the C stack (no buffer shared between threads), then launched
   with the GIL released (a launch waits when the device's queue is full). codes: one letter an
   argument (struct's letters: Q pointer/u64, q i64, I/i 32-bit, H/h 16-bit and f16/bf16 bits,
   B/b 8-bit, f float, d double; T a 128-byte tensor map as bytes); offsets: where each goes
   (backends/params.py lays them out). */
#define MAX_ARGS 256
#define MAX_BYTES 32768

typedef struct {
    launch_fn call;
    void *function;
    Py_ssize_t n, size;
    char codes[MAX_ARGS];
    unsigned offsets[MAX_ARGS];
} kernel_t;

static long width(char code) {
    switch (code) {
    case 'Q': case 'q': case 'd': return 8;
    case 'I': case 'i': case 'f': return 4;
    case 'H': case 'h': return 2;
    case 'B': case 'b': return 1;
    case 'T': return 128;
    default: return 1L << 30;       /* unknown: never fits */
    }
}

static void free_kernel(PyObject *capsule) { PyMem_Free(PyCapsule_GetPointer(capsule, NULL)); }

static int pack(const kernel_t *k, PyObject *const *values, unsigned char *buf) {
    for (Py_ssize_t i = 0; i < k->n; ++i) {
        unsigned char *at = buf + k->offsets[i];
        PyObject *v = values[i];
        switch (k->codes[i]) {
        case 'Q': { unsigned long long x = PyLong_AsUnsignedLongLong(v); memcpy(at, &x, 8); break; }
        case 'q': { long long x = PyLong_AsLongLong(v); memcpy(at, &x, 8); break; }
        case 'I': { unsigned long x = PyLong_AsUnsignedLong(v); unsigned y = (unsigned)x; memcpy(at, &y, 4); break; }
        case 'i': { long x = PyLong_AsLong(v); int y = (int)x; memcpy(at, &y, 4); break; }
        case 'H': case 'h': { long x = PyLong_AsLong(v); unsigned short y = (unsigned short)x; memcpy(at, &y, 2); break; }
        case 'B': case 'b': { long x = PyLong_AsLong(v); *at = (unsigned char)x; break; }
        case 'f': { float x = (float)PyFloat_AsDouble(v); memcpy(at, &x, 4); break; }
        case 'd': { double x = PyFloat_AsDouble(v); memcpy(at, &x, 8); break; }
        case 'T': {
            char *bytes; Py_ssize_t len;
            if (PyBytes_AsStringAndSize(v, &bytes, &len) < 0) return -1;
            if (len != 128) { PyErr_SetString(PyExc_ValueError, "a tensor map is 128 bytes"); return -1; }
            memcpy(at, bytes, 128);
            break;
        }
        default: PyErr_SetString(PyExc_ValueError, "unknown argument code"); return -1;
        }
        if (PyErr_Occurred()) return -1;
    }
    return 0;
}

static PyObject *go(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    const kernel_t *k = PyCapsule_GetPointer(self, NULL);
    if (nargs != 8 + k->n) {
        PyErr_Format(PyExc_TypeError, "launch: expected %zd arguments, got %zd", 8 + k->n, nargs);
        return NULL;
    }
    unsigned dims[7];
    for (int i = 0; i < 7; ++i) {
        unsigned long v = PyLong_AsUnsignedLong(args[i]);
        if (v > 0xffffffffUL && !PyErr_Occurred())
            PyErr_SetString(PyExc_OverflowError, "launch: a grid, block or shared-memory size over 32 bits");
        dims[i] = (unsigned)v;
    }
    void *stream = PyLong_AsVoidPtr(args[7]);
    _Alignas(64) unsigned char buf[MAX_BYTES];
    void *ptrs[MAX_ARGS];
    if (PyErr_Occurred() || pack(k, args + 8, buf) < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < k->n; ++i)
        ptrs[i] = buf + k->offsets[i];
    int err;
    Py_BEGIN_ALLOW_THREADS
    err = k->call(k->function, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], stream, ptrs, NULL);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(err);
}

static PyMethodDef go_def = {"go", (PyCFunction)(void (*)(void))go, METH_FASTCALL,
                             "go(gx, gy, gz, bx, by, bz, smem, stream, *values) -> error code"};

static PyObject *launcher(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    const char *codes; Py_ssize_t n;
    if (nargs != 5) {
        PyErr_SetString(PyExc_TypeError, "launcher(address, function, codes, offsets, size)");
        return NULL;
    }
    void *call = PyLong_AsVoidPtr(args[0]);
    void *function = PyLong_AsVoidPtr(args[1]);
    Py_ssize_t size = PyLong_AsSsize_t(args[4]);
    if (PyErr_Occurred() || PyBytes_AsStringAndSize(args[2], (char **)&codes, &n) < 0)
        return NULL;
    if (call == NULL || n > MAX_ARGS || size > MAX_BYTES || PySequence_Size(args[3]) != n) {
        PyErr_SetString(PyExc_ValueError, "launcher: no launch address, or more arguments or bytes than the stub packs");
        return NULL;
    }
    kernel_t *k = PyMem_Calloc(1, sizeof(kernel_t));
    if (k == NULL)
        return PyErr_NoMemory();
    k->call = (launch_fn)call;
    k->function = function;
    k->n = n;
    k->size = size;
    memcpy(k->codes, codes, n);
    for (Py_ssize_t i = 0; i < n; ++i) {
        PyObject *o = PySequence_GetItem(args[3], i);
        long off = o ? PyLong_AsLong(o) : -1;
        Py_XDECREF(o);
        if (off < 0 || off + width(codes[i]) > size) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_ValueError, "launcher: an argument's offset lies outside the packed size");
            PyMem_Free(k);
            return NULL;
        }
        k->offsets[i] = (unsigned)off;
    }
    PyObject *capsule = PyCapsule_New(k, NULL, free_kernel);
    if (capsule == NULL) {
        PyMem_Free(k);
        return NULL;
    }
    PyObject *f = PyCFunction_New(&go_def, capsule);
    Py_DECREF(capsule);
    return f;
}

static PyMethodDef methods[] = {
    {"launcher", (PyCFunction)(void (*)(void))launcher, METH_FASTCALL,
     "launcher(address, function, codes, offsets, size) -> go: one kernel's packing launcher"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "portable_launch_stub", NULL, -1, methods};

PyMODINIT_FUNC PyInit_portable_launch_stub(void) { return PyModule_Create(&module_def); }
