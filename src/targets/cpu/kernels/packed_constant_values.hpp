#pragma once
// The plain values of a constant that a compiled file stores packed, whichever
// of the cpu target's kernels packed it (oneDNN's blocked layouts, Kiln's own:
// own_packed_layout.hpp). What a kernel uses when it cannot read the packed
// bytes in place, and what a loaded program restores its literals from.
#include <cstddef>

#include "kiln/argument.hpp"
#include "targets/cpu/kernels/cpu_kernel.hpp"

namespace kiln {

// The values of a literal of shape `whole` (standard) from its packed form;
// a damaged form is a parse_error naming what is wrong.
argument restore_packed_constant(const packed_constant& form, const shape& whole);

// The values of constant input `index` of `r` (standard strides): as given,
// or restored from the packed form the request carries.
argument constant_values(const kernel_request& r, std::size_t index);

}  // namespace kiln
