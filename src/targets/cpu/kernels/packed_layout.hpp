#pragma once
// A constant packed for a oneDNN primitive, as a compiled file stores it:
// the copy's memory descriptor and the plain view it restores into, written
// field by field as a Kiln value (oneDNN 2.x has no descriptor blob API, and
// the struct's bytes would tie the file to one build of the library).
// Descriptors read back are checked before oneDNN sees them: a damaged file
// gives a clear error, never an out-of-bounds read.
#include <oneapi/dnnl/dnnl.hpp>

#include <memory>

#include "kiln/argument.hpp"

namespace kiln::dnnl_support {

// The packed form of a kernel's copy `copy` of a constant whose values `plain`
// describes, or null when the copy's layout is not a blocked one (the file
// then stores the plain values). `owner` keeps the copy's bytes alive.
std::shared_ptr<const packed_constant> export_packed(const dnnl::memory& copy, const dnnl::memory::desc& plain,
                                                     std::shared_ptr<void> owner);

// The layout of a packed constant read back from a file, checked: the copy's
// descriptor addresses exactly form.bytes, the plain one has its dims and
// type and stays inside `whole` (the literal's own shape). Failures raise
// error_kind::parse_error saying what is wrong.
struct packed_descs {
    dnnl::memory::desc packed;
    dnnl::memory::desc plain;
};
packed_descs read_packed_layout(const packed_constant& form, const shape& whole);

// The plain values of a literal of shape `whole` restored from its packed
// form (a reorder back to the plain layout); padding between viewed elements is zero.
argument restore_packed(const packed_constant& form, const shape& whole);

}  // namespace kiln::dnnl_support
