/* A launch call from Python without a binding's argument objects.

   launch = bind(address of cuLaunchKernel or hipModuleLaunchKernel)
   err = launch(function, gx, gy, gz, bx, by, bz, smem, stream, params, extra)

   Every argument is a Python int (handles and pointers as their addresses); the result is
   the driver's error code. Both vendors' launch functions take the same C arguments.
   Built by backends/launch_stub.py with the host's C compiler; the cuda-python binding
   stays the fallback where it cannot be built. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

typedef int (*launch_fn)(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                         unsigned bz, unsigned smem, void *stream, void **params, void **extra);

static PyObject *launch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 11) {
        PyErr_Format(PyExc_TypeError, "launch: expected 11 arguments, got %zd", nargs);
        return NULL;
    }
    launch_fn call = (launch_fn)PyLong_AsVoidPtr(self);
    void *f = PyLong_AsVoidPtr(args[0]);
    unsigned dims[7];
    for (int i = 0; i < 7; ++i) {
        unsigned long v = PyLong_AsUnsignedLong(args[1 + i]);
        if (v > 0xffffffffUL && !PyErr_Occurred())
            PyErr_SetString(PyExc_OverflowError, "launch: a grid, block or shared-memory size over 32 bits");
        dims[i] = (unsigned)v;
    }
    void *stream = PyLong_AsVoidPtr(args[8]);
    void **params = (void **)PyLong_AsVoidPtr(args[9]);
    void **extra = (void **)PyLong_AsVoidPtr(args[10]);
    if (PyErr_Occurred())
        return NULL;
    int err;
    /* the launch can wait when the device's queue is full: let other threads run */
    Py_BEGIN_ALLOW_THREADS
    err = call(f, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], dims[6], stream, params, extra);
    Py_END_ALLOW_THREADS
    return PyLong_FromLong(err);
}

static PyMethodDef launch_def = {"launch", (PyCFunction)(void (*)(void))launch, METH_FASTCALL,
                                 "launch(function, gx, gy, gz, bx, by, bz, smem, stream, params, extra) -> error code"};

static PyObject *bind(PyObject *module, PyObject *address) {
    if (!PyLong_Check(address) || PyLong_AsVoidPtr(address) == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_ValueError, "bind: expected the launch function's address as a non-zero int");
        return NULL;
    }
    return PyCFunction_New(&launch_def, address);
}

static PyMethodDef methods[] = {
    {"bind", bind, METH_O, "bind(address) -> launch: a launcher calling the C function at address"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "portable_launch_stub", NULL, -1, methods};

PyMODINIT_FUNC PyInit_portable_launch_stub(void) { return PyModule_Create(&module_def); }
