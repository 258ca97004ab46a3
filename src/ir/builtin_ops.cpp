#include "kiln/builtin_ops.hpp"

namespace kiln::op {

namespace {
[[noreturn]] void not_computable(const std::string& name) {
    fail(error_kind::runtime, name + " is evaluated by the executor, not computed");
}
}  // namespace

shape param::compute_shape(const std::vector<shape>& inputs) const {
    if (!inputs.empty()) fail("@param takes no inputs");
    return param_shape;
}
void param::compute(const argument&, const std::vector<argument>&) const { not_computable("@param"); }

shape literal_op::compute_shape(const std::vector<shape>&) const {
    fail(error_kind::runtime, "the shape of a @literal comes from its data");
}
void literal_op::compute(const argument&, const std::vector<argument>&) const { not_computable("@literal"); }

shape return_op::compute_shape(const std::vector<shape>& inputs) const {
    if (inputs.empty()) fail("@return needs at least one input");
    return shape{};
}
void return_op::compute(const argument&, const std::vector<argument>&) const { not_computable("@return"); }

}  // namespace kiln::op

namespace kiln {

value attribute_to_value(const shape& s) {
    return value(value_map{{"type", value(to_string(s.type()))},
                           {"lens", attribute_to_value(s.lens())},
                           {"strides", attribute_to_value(s.strides())}});
}

void attribute_from_value(const value& v, shape& s) {
    const value* type = v.find("type");
    const value* lens = v.find("lens");
    if (type == nullptr || lens == nullptr)
        fail(error_kind::type_error, "a shape needs 'type' and 'lens', got " + to_string(v));
    std::vector<std::size_t> l;
    attribute_from_value(*lens, l);
    const value* strides = v.find("strides");
    if (strides == nullptr) {
        s = shape(parse_dtype(type->as_string()), l);
        return;
    }
    std::vector<std::size_t> st;
    attribute_from_value(*strides, st);
    s = shape(parse_dtype(type->as_string()), l, st);
}

}  // namespace kiln
