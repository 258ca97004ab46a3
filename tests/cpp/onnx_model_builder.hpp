#pragma once
// Builds small ONNX models in memory for the importer tests, with the classes
// protoc generates from the onnx package's schema.
#include <cstring>
#include <string>
#include <vector>

#include "kiln/kiln.hpp"
#include "onnx.pb.h"

namespace kiln::test {

class onnx_model_builder {
public:
    explicit onnx_model_builder(std::int64_t opset = 17) {
        model_.set_ir_version(8);
        auto* op = model_.add_opset_import();
        op->set_domain("");
        op->set_version(opset);
        graph_ = model_.mutable_graph();
        graph_->set_name("test");
    }

    // A dim of -1 becomes the symbolic dim "N".
    onnx_model_builder& input(const std::string& name, std::int32_t type, const std::vector<std::int64_t>& dims) {
        auto* tensor = graph_->add_input()->mutable_type()->mutable_tensor_type();
        graph_->mutable_input(graph_->input_size() - 1)->set_name(name);
        tensor->set_elem_type(type);
        auto* s = tensor->mutable_shape();
        for (auto d : dims) {
            auto* dim = s->add_dim();
            if (d < 0) dim->set_dim_param("N");
            else dim->set_dim_value(d);
        }
        return *this;
    }

    onnx_model_builder& output(const std::string& name) {
        graph_->add_output()->set_name(name);
        return *this;
    }

    onnx::NodeProto& node(const std::string& op_type, const std::vector<std::string>& inputs,
                          const std::vector<std::string>& outputs, const std::string& name = "") {
        auto* n = graph_->add_node();
        n->set_op_type(op_type);
        n->set_name(name);
        for (const auto& in : inputs) n->add_input(in);
        for (const auto& out : outputs) n->add_output(out);
        return *n;
    }

    onnx::TensorProto& initializer(const std::string& name, std::int32_t type, const std::vector<std::int64_t>& dims) {
        auto* t = graph_->add_initializer();
        t->set_name(name);
        t->set_data_type(type);
        for (auto d : dims) t->add_dims(d);
        return *t;
    }

    onnx::TensorProto& float_initializer(const std::string& name, const std::vector<std::int64_t>& dims,
                                         const std::vector<float>& values) {
        auto& t = initializer(name, onnx::TensorProto::FLOAT, dims);
        for (float v : values) t.add_float_data(v);
        return t;
    }

    onnx::TensorProto& int64_initializer(const std::string& name, const std::vector<std::int64_t>& values) {
        auto& t = initializer(name, onnx::TensorProto::INT64, {static_cast<std::int64_t>(values.size())});
        for (auto v : values) t.add_int64_data(v);
        return t;
    }

    onnx::ModelProto& model() { return model_; }
    onnx::GraphProto& graph() { return *graph_; }
    std::string bytes() const { return model_.SerializeAsString(); }
    program parse(const onnx_options& options = {}) const {
        std::string b = bytes();
        return parse_onnx_buffer(b.data(), b.size(), options);
    }

private:
    onnx::ModelProto model_;
    onnx::GraphProto* graph_;
};

inline void set_attr(onnx::NodeProto& n, const std::string& name, std::int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
}
inline void set_attr(onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
}
inline void set_attr(onnx::NodeProto& n, const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
}
inline void set_attr(onnx::NodeProto& n, const std::string& name, const std::vector<std::int64_t>& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
}

// Raw little-endian bytes of `values`, as raw_data holds them.
template <class T>
std::string raw_bytes(const std::vector<T>& values) {
    std::string out(values.size() * sizeof(T), '\0');
    if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
    return out;
}

}  // namespace kiln::test
