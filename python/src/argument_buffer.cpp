// The Python buffer protocol for kiln.argument, so that memoryview(arg),
// struct.unpack_from and other buffer consumers read a result in place (as
// MIGraphX's argument allows). numpy prefers __array__ only where the buffer
// cannot describe the element type (bfloat16, float8, float4, int4, int2).
#include <memory>
#include <vector>

#include "bindings.hpp"

namespace kiln::python {

namespace {

// struct-module format codes; bfloat16 and the storage types have none.
const char* buffer_format(dtype t) {
    switch (t) {
        case dtype::bool_type:
            return "?";
        case dtype::half_type:
            return "e";
        case dtype::float_type:
            return "f";
        case dtype::double_type:
            return "d";
        case dtype::int8_type:
            return "b";
        case dtype::uint8_type:
            return "B";
        case dtype::int16_type:
            return "h";
        case dtype::uint16_type:
            return "H";
        case dtype::int32_type:
            return "i";
        case dtype::uint32_type:
            return "I";
        case dtype::int64_type:
            return "q";
        case dtype::uint64_type:
            return "Q";
        default:
            return nullptr;
    }
}

// Extents and byte strides in the Py_ssize_t form a Py_buffer points at; owned
// by the view (view->internal) until the consumer releases it.
struct buffer_layout {
    std::vector<Py_ssize_t> lens;
    std::vector<Py_ssize_t> strides;
};

int get_buffer(PyObject* self, Py_buffer* view, int flags) {
    const auto& arg = *nb::inst_ptr<argument>(nb::handle(self));
    const shape& s = arg.get_shape();
    if (arg.location() == memory_location::device) {
        PyErr_SetString(PyExc_BufferError, "kiln.argument: the memory is a device's, which the host cannot read; "
                                           "use the target's copy_from, or torch.from_dlpack for a CUDA tensor");
        return -1;
    }
    const char* format = buffer_format(s.type());
    if (format == nullptr) {
        PyErr_SetString(PyExc_BufferError, ("kiln.argument: a " + to_string(s.type()) +
                                            " argument has no buffer format; use numpy.asarray(arg) with ml_dtypes")
                                               .c_str());
        return -1;
    }
    auto layout = std::make_unique<buffer_layout>();
    auto item = static_cast<Py_ssize_t>(s.element_size());
    for (std::size_t d = 0; d < s.ndim(); ++d) {
        layout->lens.push_back(static_cast<Py_ssize_t>(s.lens()[d]));
        layout->strides.push_back(static_cast<Py_ssize_t>(s.strides()[d]) * item);
    }
    bool contiguous = s.standard() || s.elements() <= 1;
    if ((flags & PyBUF_STRIDES) != PyBUF_STRIDES && !contiguous) {
        PyErr_SetString(PyExc_BufferError,
                        "kiln.argument: the argument is not contiguous; request a strided buffer (memoryview does)");
        return -1;
    }
    if (((flags & PyBUF_C_CONTIGUOUS) == PyBUF_C_CONTIGUOUS || (flags & PyBUF_F_CONTIGUOUS) == PyBUF_F_CONTIGUOUS ||
         (flags & PyBUF_ANY_CONTIGUOUS) == PyBUF_ANY_CONTIGUOUS) &&
        !contiguous) {
        PyErr_SetString(PyExc_BufferError, "kiln.argument: a contiguous buffer was requested of a strided argument");
        return -1;
    }
    view->buf = const_cast<std::byte*>(arg.data());
    view->obj = Py_NewRef(self);
    view->len = static_cast<Py_ssize_t>(s.elements()) * item;
    view->itemsize = item;
    view->readonly = 0;
    view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(format) : nullptr;
    view->ndim = static_cast<int>(s.ndim());
    view->shape = (flags & PyBUF_ND) == PyBUF_ND ? layout->lens.data() : nullptr;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? layout->strides.data() : nullptr;
    view->suboffsets = nullptr;
    view->internal = layout.release();
    return 0;
}

void release_buffer(PyObject*, Py_buffer* view) {
    delete static_cast<buffer_layout*>(view->internal);
}

const PyType_Slot buffer_slots[] = {
    {Py_bf_getbuffer, reinterpret_cast<void*>(get_buffer)},
    {Py_bf_releasebuffer, reinterpret_cast<void*>(release_buffer)},
    {0, nullptr},
};

}  // namespace

const PyType_Slot* argument_buffer_slots() {
    return buffer_slots;
}

}  // namespace kiln::python
