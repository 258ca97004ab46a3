#pragma once
// The CPU target: lowers a module to a fixed execution plan whose
// intermediates live at planned offsets in one arena, so running allocates
// nothing but the returned outputs.
#include "kiln/target.hpp"

namespace kiln {

class cpu_target final : public target {
public:
    std::string name() const override { return "cpu"; }
    pass_list get_passes(const compile_options& options) const override;
    std::shared_ptr<executable> lower(const module& m, const compile_options& options) const override;
    // cpu_identity(): the CPU's model and the ISA extensions the kernels dispatch on.
    std::string identity() const override;
    // product_weight_layouts: [N, K] weights for one row, row-major for more.
    std::vector<std::string> passes_choosing_layout_by_length() const override { return {"product_weight_layouts"}; }
};

}  // namespace kiln
