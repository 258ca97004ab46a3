#include "targets/cpu/kernels/packed_constant_values.hpp"

#include "kiln/errors.hpp"
#include "targets/cpu/kernels/convolution/convolution_algorithms.hpp"
#include "targets/cpu/kernels/own_packed_layout.hpp"
#include "targets/cpu/kernels/packed_layout.hpp"

namespace kiln {

argument restore_packed_constant(const packed_constant& form, const shape& whole) {
    if (!own_layout::is_own(form)) return dnnl_support::restore_packed(form, whole);
    const std::string algorithm = own_layout::algorithm_of(form);
    if (algorithm == winograd_convolution.name || algorithm == winograd_convolution_avx512.name)
        return winograd_restore_weights(form, whole);
    if (algorithm == pairwise_sum_convolution.name) return pairwise_sum_restore_weights(form, whole);
    if (algorithm == im2col_convolution.name) return im2col_restore_weights(form, whole);
    if (algorithm == channel_split_convolution.name) return channel_split_restore_weights(form, whole);
    if (algorithm == onednn_winograd_convolution.name) return onednn_winograd_restore_weights(form, whole);
    fail(error_kind::parse_error, "packed weights: the layout names the kernel algorithm '" + algorithm +
                                      "', which stores no packed weights in this build");
}

argument constant_values(const kernel_request& r, std::size_t index) {
    if (const packed_constant* form = r.packed_input(index))
        return restore_packed_constant(*form, r.input_shapes[index].as_standard());
    return r.constant_inputs[index];
}

}  // namespace kiln
