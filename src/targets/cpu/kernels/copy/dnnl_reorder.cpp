// Layout changes between plain and blocked activations through oneDNN's reorder.
#include "ops/blocked_layout.hpp"
#include "targets/cpu/kernels/cpu_kernels.hpp"
#include "targets/cpu/kernels/dnnl_support.hpp"

namespace kiln {

namespace ds = dnnl_support;

std::shared_ptr<const cpu_kernel> make_reorder_kernel(const kernel_request& r) {
    const bool to = r.op.get_if<op::to_blocked>() != nullptr;
    if (!to && r.op.get_if<op::from_blocked>() == nullptr) return nullptr;
    const shape& plain = to ? r.input_shapes[0] : r.output_shape;
    const std::size_t block = (to ? r.output_shape : r.input_shapes[0]).lens().back();
    // The blocked side is described by the plain dims: oneDNN pads the
    // channels up to whole blocks (and writes zeros there) itself.
    auto src = to ? ds::plain_desc(plain) : ds::blocked_desc(plain, block);
    auto dst = to ? ds::blocked_desc(plain, block) : ds::plain_desc(plain);
    try {
        dnnl::reorder::primitive_desc pd(ds::cpu_engine(), src, ds::cpu_engine(), dst, ds::user_scratchpad_attr());
        return std::make_shared<ds::primitive_kernel>(dnnl::reorder(pd), ds::arg_descs{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}},
                                                                     std::vector<int>{0, ds::primitive_kernel::result_slot}, ds::fixed_args{},
                                                                     pd.scratchpad_desc().get_size());
    } catch (const dnnl::error&) {
        return nullptr;
    }
}

}  // namespace kiln
