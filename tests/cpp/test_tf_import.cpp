// TensorFlow importer: GraphDefs built here with Kiln's own schema classes
// (graph.pb.h); parsing, output selection and the errors bad graphs raise.
#include <gtest/gtest.h>

#include <string>

#include "graph.pb.h"
#include "kiln/kiln.hpp"

using namespace kiln;

namespace {

tf::NodeDef* add_node(tf::GraphDef& g, const std::string& name, const std::string& op,
                      std::initializer_list<std::string> inputs = {}) {
    auto* n = g.add_node();
    n->set_name(name);
    n->set_op(op);
    for (const auto& in : inputs) n->add_input(in);
    return n;
}

void add_placeholder(tf::GraphDef& g, const std::string& name, std::initializer_list<std::int64_t> dims) {
    auto* n = add_node(g, name, "Placeholder");
    (*n->mutable_attr())["dtype"].set_type(tf::DT_FLOAT);
    auto* s = (*n->mutable_attr())["shape"].mutable_shape();
    for (auto d : dims) s->add_dim()->set_size(d);
}

void add_float_const(tf::GraphDef& g, const std::string& name, std::initializer_list<std::int64_t> dims,
                     std::initializer_list<float> values) {
    auto* n = add_node(g, name, "Const");
    (*n->mutable_attr())["dtype"].set_type(tf::DT_FLOAT);
    auto* t = (*n->mutable_attr())["value"].mutable_tensor();
    t->set_dtype(tf::DT_FLOAT);
    for (auto d : dims) t->mutable_tensor_shape()->add_dim()->set_size(d);
    for (auto v : values) t->add_float_val(v);
}

program parse(const tf::GraphDef& g, const tf_options& options = {}) {
    std::string bytes = g.SerializeAsString();
    return parse_tf_buffer(bytes.data(), bytes.size(), options);
}

template <class F>
error error_from(F&& f) {
    try {
        f();
    } catch (const error& e) {
        return e;
    }
    ADD_FAILURE() << "expected a kiln::error";
    return error(error_kind::runtime, "");
}

// x [batch?, 3] -> Relu(x + c) -> Identity, with a control input and a NoOp.
tf::GraphDef add_relu_graph() {
    tf::GraphDef g;
    add_placeholder(g, "x", {-1, 3});
    add_float_const(g, "c", {3}, {1.0f, -2.0f, 0.5f});
    add_node(g, "init", "NoOp");
    add_node(g, "sum", "AddV2", {"x", "c:0", "^init"});
    add_node(g, "relu", "Relu", {"sum"});
    add_node(g, "out", "Identity", {"relu"});
    return g;
}

}  // namespace

TEST(TfImport, AddReluBatchAndOutputs) {
    tf_options options;
    options.batch_size = 2;
    program p = parse(add_relu_graph(), options);
    EXPECT_EQ(p.get_main_module()->get_parameter_shapes().at("x").lens(), (std::vector<std::size_t>{2, 3}));
    p.compile(get_target("ref"));
    std::vector<float> x{0, 0, 0, -5, 5, -5};
    auto results = p.eval({{"x", argument(shape(dtype::float_type, {2, 3}), x.data())}});
    ASSERT_EQ(results.size(), 1u);
    EXPECT_EQ(results[0].to_vector<float>(), (std::vector<float>{1, 0, 0.5f, 0, 3, 0}));
}

TEST(TfImport, MapInputDimsAndOutputNames) {
    tf_options options;
    options.map_input_dims["x"] = {4, 3};
    options.output_names = {"sum:0", "relu"};
    program p = parse(add_relu_graph(), options);
    EXPECT_EQ(p.get_main_module()->get_parameter_shapes().at("x").lens(), (std::vector<std::size_t>{4, 3}));
    EXPECT_EQ(p.get_output_shapes().size(), 2u);
}

TEST(TfImport, ProtobufsReasonIsInTheErrorNotOnStderr) {
    std::string bytes = add_relu_graph().SerializeAsString();
    bytes.replace(bytes.find("Relu"), 4, "\xff\xfe\xfd\xfc");  // the op's name, no longer UTF-8
    testing::internal::CaptureStderr();
    auto e = error_from([&] { parse_tf_buffer(bytes.data(), bytes.size()); });
    const std::string logged = testing::internal::GetCapturedStderr();
    EXPECT_EQ(e.kind(), error_kind::parse_error);
    EXPECT_NE(std::string(e.what()).find("String field 'kiln.tf.NodeDef.op' contains invalid UTF-8 data"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(logged, "");
}

TEST(TfImport, Errors) {
    std::string bytes = add_relu_graph().SerializeAsString();
    auto cut = error_from([&] { parse_tf_buffer(bytes.data(), bytes.size() / 2); });
    EXPECT_EQ(cut.kind(), error_kind::parse_error);
    EXPECT_NE(std::string(cut.what()).find("malformed or truncated"), std::string::npos) << cut.what();

    auto g = add_relu_graph();
    g.mutable_node(4)->set_input(0, "nowhere");
    auto missing = error_from([&] { parse(g); });
    EXPECT_NE(std::string(missing.what()).find("Relu 'relu': input 'nowhere' names no node"), std::string::npos)
        << missing.what();

    g = add_relu_graph();
    g.mutable_node(3)->set_op("Frobnicate");
    g.mutable_node(4)->set_op("Wibble");
    auto unsupported = error_from([&] { parse(g); });
    EXPECT_EQ(unsupported.kind(), error_kind::not_implemented);
    EXPECT_NE(std::string(unsupported.what()).find("Frobnicate ('sum'); Wibble ('relu')"), std::string::npos)
        << unsupported.what();

    g = add_relu_graph();
    add_node(g, "w", "VarHandleOp");
    auto variables = error_from([&] { parse(g); });
    EXPECT_NE(std::string(variables.what())
                  .find("the graph still holds variables (node 'w'): freeze it (convert_variables_to_constants_v2)"),
              std::string::npos)
        << variables.what();

    g = add_relu_graph();
    (*g.mutable_node(0)->mutable_attr())["dtype"].set_i(1);
    auto attr = error_from([&] { parse(g); });
    EXPECT_EQ(attr.kind(), error_kind::type_error);
    EXPECT_NE(std::string(attr.what()).find("attribute 'dtype' must be a type but is an int"), std::string::npos)
        << attr.what();

    auto file = error_from([] { parse_tf("/nonexistent/model.pb"); });
    EXPECT_EQ(file.kind(), error_kind::file_not_found);
}
