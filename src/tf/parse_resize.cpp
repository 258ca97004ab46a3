// ResizeBilinear and ResizeNearestNeighbor (images NHWC) as Kiln's resize on
// NCHW. TensorFlow's coordinate rules map onto resize's:
//   align_corners:        align_corners (nearest rounds half up: TF's round)
//   half_pixel_centers:   half_pixel; nearest floor((x + 0.5) / s), which is
//                         half_pixel's (x + 0.5) / s - 0.5 rounded half up
//   neither (legacy):     asymmetric, nearest rounding down.
#include "tf/tf_parser.hpp"

namespace kiln::tf_import {

namespace {

parse_function parse_resize(std::string mode) {
    return [mode](const node_context& ctx, const args_t& args) -> args_t {
        ctx.expect_inputs(args, 2, 2);
        auto size = ctx.constant_ints(args[1], "size");
        if (size.size() != 2 || size[0] < 1 || size[1] < 1)
            ctx.fail(error_kind::invalid_argument, "size must be two positive extents");
        bool align = ctx.get_bool("align_corners", false);
        bool half = ctx.get_bool("half_pixel_centers", false);
        if (align && half)
            ctx.fail(error_kind::invalid_argument, "align_corners and half_pixel_centers cannot both be set");
        auto x = ctx.to_nchw(args[0]);
        const auto& lens = x->get_shape().lens();
        std::vector<std::int64_t> out{static_cast<std::int64_t>(lens[0]), static_cast<std::int64_t>(lens[1]), size[0],
                                      size[1]};
        std::vector<double> scales{1.0, 1.0, static_cast<double>(size[0]) / static_cast<double>(lens[2]),
                                   static_cast<double>(size[1]) / static_cast<double>(lens[3])};
        std::string coordinates = align ? "align_corners" : half ? "half_pixel" : "asymmetric";
        std::string rounding = mode == "nearest" && !align && !half ? "floor" : "round_prefer_ceil";
        auto y = ctx.add("resize", {x},
                         value_map{{"out_lens", int_list(out)},
                                   {"scales", value_list(scales.begin(), scales.end())},
                                   {"mode", mode},
                                   {"coordinate_transformation_mode", coordinates},
                                   {"nearest_mode", rounding}});
        return {ctx.from_nchw(y)};
    };
}

}  // namespace

void add_resize_parsers(parser_table& table) {
    table["ResizeBilinear"] = parse_resize("linear");
    table["ResizeNearestNeighbor"] = parse_resize("nearest");
}

}  // namespace kiln::tf_import
