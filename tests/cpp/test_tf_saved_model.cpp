// SavedModel pieces read without TensorFlow: the LevelDB-table reader of the
// variables' index (tables built here byte by byte, then cut and corrupted)
// and function inlining (a GraphDef calling its library).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "graph.pb.h"
#include "kiln/kiln.hpp"
#include "tf/function_inliner.hpp"
#include "tf/sstable_reader.hpp"

using namespace kiln;

namespace {

void put_varint(std::string& out, std::uint64_t v) {
    while (v >= 0x80) {
        out += static_cast<char>((v & 0x7f) | 0x80);
        v >>= 7;
    }
    out += static_cast<char>(v);
}

void put_fixed32(std::string& out, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) out += static_cast<char>((v >> (8 * i)) & 0xff);
}

// A block of sorted entries, keys prefix-compressed, one restart point, and
// its trailer (compression type, unchecked checksum).
std::string block(const std::map<std::string, std::string>& entries, char compression = 0) {
    std::string out, previous;
    for (const auto& [key, value] : entries) {
        std::size_t shared = 0;
        while (shared < previous.size() && shared < key.size() && previous[shared] == key[shared]) ++shared;
        put_varint(out, shared);
        put_varint(out, key.size() - shared);
        put_varint(out, value.size());
        out += key.substr(shared) + value;
        previous = key;
    }
    put_fixed32(out, 0);
    put_fixed32(out, 1);
    std::string trailer(5, '\0');
    trailer[0] = compression;
    return out + trailer;
}

std::string handle(std::size_t offset, std::size_t size) {
    std::string out;
    put_varint(out, offset);
    put_varint(out, size);
    return out;
}

// A table of two data blocks, an empty metaindex block, the index block and the footer.
std::string table(char compression = 0) {
    std::map<std::string, std::string> first{{"", "header"}, {"layer/bias", "b"}, {"layer/kernel", "kk"}};
    std::map<std::string, std::string> second{{"layer2/kernel", std::string(300, 'v')}};
    std::string file;
    std::string b1 = block(first, compression), b2 = block(second);
    file += b1 + b2;
    std::string meta = block({});
    std::size_t meta_at = file.size();
    file += meta;
    std::string index =
        block({{"layer/kernel", handle(0, b1.size() - 5)}, {"layer2/kernel", handle(b1.size(), b2.size() - 5)}});
    std::size_t index_at = file.size();
    file += index;
    std::string footer = handle(meta_at, meta.size() - 5) + handle(index_at, index.size() - 5);
    footer.resize(40, '\0');
    for (int i = 0; i < 8; ++i) footer += static_cast<char>((0xdb4775248b80fb57ULL >> (8 * i)) & 0xff);
    return file + footer;
}

TEST(TfSavedModel, SstableReadsEveryEntry) {
    auto entries = tf_import::read_sstable(table(), "t.index");
    ASSERT_EQ(entries.size(), 4u);
    EXPECT_EQ(entries.at(""), "header");
    EXPECT_EQ(entries.at("layer/bias"), "b");
    EXPECT_EQ(entries.at("layer/kernel"), "kk");
    EXPECT_EQ(entries.at("layer2/kernel"), std::string(300, 'v'));
}

TEST(TfSavedModel, SstableTruncatedOrCorruptIsAnError) {
    const std::string full = table();
    for (std::size_t n = 0; n < full.size(); ++n) {
        try {
            tf_import::read_sstable(full.substr(0, n), "t.index");
            ADD_FAILURE() << "a table cut to " << n << " bytes was read";
        } catch (const error& e) {
            EXPECT_NE(std::string(e.what()).find("t.index"), std::string::npos) << e.what();
        }
    }
    for (std::size_t i = 0; i < full.size(); ++i) {
        std::string changed = full;
        changed[i] = static_cast<char>(changed[i] ^ 0x5a);
        try {
            tf_import::read_sstable(changed, "t.index");
        } catch (const error&) {
        }
    }
}

TEST(TfSavedModel, SstableRefusesCompressedBlocks) {
    try {
        tf_import::read_sstable(table(1), "t.index");
        FAIL() << "a snappy block was read";
    } catch (const error& e) {
        EXPECT_EQ(e.kind(), error_kind::not_implemented);
        EXPECT_NE(std::string(e.what()).find("snappy-compressed"), std::string::npos) << e.what();
    }
}

tf::NodeDef* add_node(tf::GraphDef& g, const std::string& name, const std::string& op,
                      std::initializer_list<std::string> inputs = {}) {
    auto* n = g.add_node();
    n->set_name(name);
    n->set_op(op);
    for (const auto& in : inputs) n->add_input(in);
    return n;
}

// f(x, y) = relu(x) + y, called through StatefulPartitionedCall.
tf::GraphDef calling_graph() {
    tf::GraphDef g;
    auto* x = add_node(g, "x", "Placeholder");
    (*x->mutable_attr())["dtype"].set_type(tf::DT_FLOAT);
    auto* dim = (*x->mutable_attr())["shape"].mutable_shape()->add_dim();
    dim->set_size(3);
    auto* c = add_node(g, "c", "Const");
    auto* t = (*c->mutable_attr())["value"].mutable_tensor();
    t->set_dtype(tf::DT_FLOAT);
    t->mutable_tensor_shape()->add_dim()->set_size(3);
    for (float v : {1.0f, 2.0f, 3.0f}) t->add_float_val(v);
    (*c->mutable_attr())["dtype"].set_type(tf::DT_FLOAT);
    auto* call = add_node(g, "call", "StatefulPartitionedCall", {"x", "c"});
    (*call->mutable_attr())["f"].mutable_func()->set_name("f");
    add_node(g, "unused", "SaveV2", {"x"});
    auto* f = g.mutable_library()->add_function();
    f->mutable_signature()->set_name("f");
    f->mutable_signature()->add_input_arg()->set_name("a");
    f->mutable_signature()->add_input_arg()->set_name("b");
    f->mutable_signature()->add_output_arg()->set_name("out");
    tf::NodeDef* relu = f->add_node_def();
    relu->set_name("relu");
    relu->set_op("Relu");
    relu->add_input("a");
    tf::NodeDef* sum = f->add_node_def();
    sum->set_name("sum");
    sum->set_op("AddV2");
    sum->add_input("relu:activations:0");
    sum->add_input("b");
    (*f->mutable_ret())["out"] = "sum:z:0";
    return g;
}

TEST(TfSavedModel, FunctionCallsAreInlined) {
    auto flat = tf_import::inline_functions(calling_graph(), {"call:0"}, "g");
    std::map<std::string, tf::NodeDef> nodes;
    for (const auto& n : flat.node()) nodes[n.name()] = n;
    ASSERT_TRUE(nodes.contains("call/relu") && nodes.contains("call/sum") && nodes.contains("call"));
    EXPECT_FALSE(nodes.contains("unused"));  // what the outputs do not need is dropped
    EXPECT_EQ(nodes["call/relu"].input(0), "x");
    EXPECT_EQ(nodes["call/sum"].input(0), "call/relu:0");
    EXPECT_EQ(nodes["call/sum"].input(1), "c");
    EXPECT_EQ(nodes["call"].op(), "IdentityN");
    EXPECT_EQ(nodes["call"].input(0), "call/sum:0");
}

TEST(TfSavedModel, BadFunctionCallsAreErrors) {
    auto missing = calling_graph();
    (*missing.mutable_node(2)->mutable_attr())["f"].mutable_func()->set_name("g");
    EXPECT_THROW(tf_import::inline_functions(missing, {"call:0"}, "g"), error);
    auto recursive = calling_graph();
    auto* self = recursive.mutable_library()->mutable_function(0)->add_node_def();
    self->set_name("again");
    self->set_op("f");
    self->add_input("a");
    self->add_input("b");
    (*recursive.mutable_library()->mutable_function(0)->mutable_ret())["out"] = "again:out:0";
    try {
        tf_import::inline_functions(recursive, {"call:0"}, "g");
        FAIL() << "a recursive function was inlined";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("recursive"), std::string::npos) << e.what();
    }
    auto bad_input = calling_graph();
    bad_input.mutable_library()->mutable_function(0)->mutable_node_def(1)->set_input(0, "nowhere:z:0");
    EXPECT_THROW(tf_import::inline_functions(bad_input, {"call:0"}, "g"), error);
}

}  // namespace
