#pragma once
// The TensorFlow importer's core: turns a GraphDef into a program. Op families
// add their parse functions to a parser_table (parser_table.cpp); each sees
// one node through a node_context. Values keep TensorFlow's layout.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph.pb.h"
#include "kiln/program.hpp"
#include "kiln/tf.hpp"

namespace kiln::tf_import {

// TensorFlow's DataType as a Kiln dtype; `what` names the value in errors.
dtype to_dtype(int tf_type, const std::string& what);
// A TensorProto's value.
literal tensor_to_literal(const tf::TensorProto& t);

// The NCHW form of NHWC values that convolutions and pooling have produced:
// elementwise ops on them run on NCHW too, so that the transposes between
// two convolutions cancel.
struct layout_cache {
    std::unordered_map<const instruction*, instruction_ref> nchw;
    // NCHW zero-padding instructions: their input and pads (Pad before a
    // convolution becomes the convolution's padding).
    std::unordered_map<const instruction*, std::pair<instruction_ref, std::vector<std::int64_t>>> zero_pads;
};

// One node being parsed: its attributes and helpers that add instructions.
class node_context {
public:
    node_context(const tf::NodeDef& node, module& m, const tf_options& options, layout_cache& layouts);

    const tf::NodeDef& node() const { return node_; }
    const std::string& op_type() const { return node_.op(); }
    module& mod() const { return mod_; }
    const tf_options& options() const { return options_; }

    // Attributes. A present attribute of another kind raises an error naming it.
    bool has_attribute(const std::string& name) const;
    std::int64_t get_int(const std::string& name, std::int64_t fallback) const;
    double get_float(const std::string& name, double fallback) const;
    bool get_bool(const std::string& name, bool fallback) const;
    std::string get_string(const std::string& name, const std::string& fallback) const;
    std::vector<std::int64_t> get_ints(const std::string& name, const std::vector<std::int64_t>& fallback = {}) const;
    // A "type" attribute as a Kiln dtype.
    dtype get_type(const std::string& name) const;
    const tf::AttrValue& get_attribute(const std::string& name) const;
    // True for NHWC (the node's data_format, else options().is_nhwc).
    bool nhwc() const;

    void expect_inputs(const std::vector<instruction_ref>& args, std::size_t lo, std::size_t hi) const;

    // Adds op `name`; results of constant inputs up to 1 MiB are computed
    // right away and become literals, so that shape arithmetic stays static.
    instruction_ref add(const std::string& name, const std::vector<instruction_ref>& inputs,
                        const value& attributes = {}) const;
    // Adds op `name` on a constant input of any size, computed now (weights
    // rearranged for Kiln's layouts).
    instruction_ref fold(const std::string& name, instruction_ref input, const value& attributes) const;
    instruction_ref add_literal(literal lit) const;
    // A rank-0 literal of dtype t holding v.
    instruction_ref add_scalar(dtype t, double v) const;
    // The integers held by a constant input.
    std::vector<std::int64_t> constant_ints(instruction_ref ins, const std::string& what) const;

    // NHWC <-> NCHW around an op that works on NCHW (nothing when the node is NCHW).
    instruction_ref to_nchw(instruction_ref x) const;
    instruction_ref from_nchw(instruction_ref x) const;
    // Elementwise op `name` (numpy broadcasting): computed on NCHW when an
    // input has an NCHW form (see layout_cache) and the result is 4-D, then
    // returned as NHWC.
    instruction_ref pointwise(const std::string& name, const std::vector<instruction_ref>& inputs,
                              const value& attributes = {}) const;
    // conv(x, w) * s as conv(x, w * s), and (conv(x, w) + c) * s as
    // conv(x, w * s) + c * s, for constant w, c and a per-channel constant
    // s [1, C, 1, 1] (the multiply a batch norm leaves after a convolution);
    // nullopt when y and s are not of that form.
    std::optional<instruction_ref> scale_convolution(instruction_ref y, instruction_ref s) const;
    // Records y as x zero-padded by `pads` (NCHW [begins..., ends...]); finds such a y.
    void note_zero_pad(instruction_ref y, instruction_ref x, const std::vector<std::int64_t>& pads) const;
    const std::pair<instruction_ref, std::vector<std::int64_t>>* zero_pad(instruction_ref y) const;
    // The NCHW form of the NHWC value x, when one is known (see layout_cache).
    std::optional<instruction_ref> known_nchw(instruction_ref x) const;
    // The NHWC value of the NCHW y, remembering y as its NCHW form.
    instruction_ref nhwc_of(instruction_ref y) const;

    [[noreturn]] void fail(error_kind kind, const std::string& message) const;

private:
    const tf::NodeDef& node_;
    module& mod_;
    const tf_options& options_;
    layout_cache& layouts_;
};

// An attribute value holding a list of integers.
value int_list(const std::vector<std::int64_t>& v);
value int_list(const std::vector<std::size_t>& v);

using args_t = std::vector<instruction_ref>;
// Returns the node's outputs in order (fewer than the op has is fine when the
// missing ones are unused).
using parse_function = std::function<args_t(const node_context&, const args_t&)>;
using parser_table = std::unordered_map<std::string, parse_function>;

// Each op family's table (parser_table.cpp joins them).
void add_graph_parsers(parser_table& table);        // parse_graph.cpp: Const, Identity, NoOp, Placeholder
void add_nn_parsers(parser_table& table);           // parse_nn.cpp: convolution, pooling, normalization, matmul
void add_elementwise_parsers(parser_table& table);  // parse_elementwise.cpp: arithmetic, activations, Cast
void add_shape_parsers(parser_table& table);        // parse_shape.cpp: Reshape ... StridedSlice, Pad, reductions
void add_select_parsers(parser_table& table);       // parse_select.cpp: comparisons, Select, Slice, GatherV2, ArgMax
void add_sequence_parsers(parser_table& table);     // parse_sequence.cpp: Split ... TopKV2, Einsum
void add_resize_parsers(parser_table& table);       // parse_resize.cpp: ResizeBilinear, ResizeNearestNeighbor
const parser_table& get_parsers();

// Imports a parsed GraphDef; `source` names it in errors.
program parse_graph(const tf::GraphDef& graph, const tf_options& options, const std::string& source);
// Imports a SavedModel directory (saved_model_reader.cpp).
program parse_saved_model(const std::string& dir, const tf_options& options);

}  // namespace kiln::tf_import
