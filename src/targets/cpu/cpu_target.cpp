#include "targets/cpu/cpu_target.hpp"

#include "kiln/passes.hpp"
#include "targets/cpu/kernels/cpu_features.hpp"
#include "targets/cpu/kernels/dnnl_support.hpp"
#include "targets/cpu/lowering/openmp_threads.hpp"
#include "targets/cpu/lowering/plan_builder.hpp"
#include "targets/cpu/passes/cpu_passes.hpp"

namespace kiln {

std::string cpu_target::identity() const {
    return cpu_identity();
}

// 16-bit float arithmetic becomes float32 first (weights stay 16-bit), so
// every later pass and kernel sees the float32 graph it knows. Dead code
// goes next so no pass spends time on it. Patch convolutions become products
// before the simplifiers, which tidy the reshapes and transposes around them. Constant propagation
// turns computed constants into literals the simplifiers can read; the
// simplifiers then create small constant expressions (merged scales and
// offsets, folded batch norms), which a second constant propagation folds.
// A constant causal mask that attention fusion leaves becomes the fused
// attention's causal flag: the kernel masks by position at any length, so a
// program can follow the sequence at run time.
// Post-op fusion runs on the simplified graph and makes bias reshapes that
// a third constant propagation folds into the literals the kernels prepack;
// before that, products over rows merged from leading dims (torch's linear)
// take those dims back, so that one program can follow a batch and a
// sequence.
// The layout pass runs on fused convolutions, after which nothing changes
// their inputs any more. CSE comes after everything that creates
// instructions; after it, constant weights read through transposes take the
// layout their products' algorithms read (known once the products are fused
// and their row counts fixed). Pointwise fusion comes last: it takes whatever elementwise
// chains the kernel fusions before it left, and after CSE, so that
// duplicates are merged before groups form; a concat only a pointwise group
// reads then joins the group. A final DCE
// removes what CSE and constant propagation leave unused. The first constant
// propagation keeps dequantized int8 weights as they are, for the
// quantized-op fusion right after it and then for the products of float
// activations by int8 weights (quantize_int8_weights); the second folds the
// ones both declined.
// int8 activations with zero point -128 become uint8 ones before that fusion,
// so that the fused int8 kernels read u8 sources without a zero point, and
// so do those with any zero point read only as products' sources.
// Normalizations that feed quantizes fuse with them before the epilogue
// fusion (which would take an attention mask add as a residual), and again
// after CSE, which merges the per-product reshape -> quantize copies of one
// layer norm's output (ViT's QDQ file) into one that can then fuse.
// Last, an int8 convolution's float result that only a global pooling
// (reduction) reads is stored channels-last, when nothing else moves it.
pass_list cpu_target::get_passes(const compile_options& options) const {
    auto keep_dequantize = std::make_shared<constant_propagation>();
    keep_dequantize->fold_dequantize = false;
    // The attention kernel broadcasts any operand over the batch: grouped-
    // query attention's key/value heads need no repeated copy.
    auto attention = std::make_shared<fuse_attention>();
    attention->read_repeated_heads_in_place = true;
    auto weights_layout = std::make_shared<product_weight_layouts>();
    weights_layout->for_every_extent = options.layouts_for_every_extent;
    weights_layout->within_a_range = options.layouts_within_a_range;
    return {std::make_shared<compute_16bit_in_float32>(), std::make_shared<dead_code_elimination>(), keep_dequantize,
            std::make_shared<unsigned_activation_codes>(), std::make_shared<unsigned_product_source_codes>(),
            std::make_shared<fuse_quantized_ops>(), std::make_shared<int8_weight_products>(),
            std::make_shared<patch_convolutions_as_products>(), std::make_shared<simplify_reshapes>(),
            std::make_shared<simplify_algebra>(), std::make_shared<constant_propagation>(),
            // Recognizers of composite ops, before post-op fusion can split them up.
            std::make_shared<fuse_gelu>(), std::make_shared<fuse_layer_norm>(), std::make_shared<fuse_rms_norm>(),
            attention, std::make_shared<causal_attention_masks>(), std::make_shared<fuse_quantized_norm>(),
            std::make_shared<fuse_quantized_epilogues>(), std::make_shared<fuse_post_ops>(),
            std::make_shared<products_keep_leading_dims>(), std::make_shared<constant_propagation>(),
            std::make_shared<propagate_blocked_layout>(dnnl_support::preferred_channel_block()),
            std::make_shared<common_subexpression_elimination>(), weights_layout,
            std::make_shared<fuse_quantized_norm>(), std::make_shared<fuse_pointwise>(),
            std::make_shared<fuse_concat_pointwise>(), std::make_shared<channels_last_spatial_reductions>(),
            std::make_shared<channels_last_average_pools>(), std::make_shared<channels_last_concat_pieces>(),
            std::make_shared<dead_code_elimination>()};
}

std::shared_ptr<executable> cpu_target::lower(const module& m, const compile_options& options) const {
    const int threads = resolve_thread_count(options.threads);
    scoped_openmp_threads guard(threads);
    return build_cpu_plan(m, options, threads);
}

}  // namespace kiln
