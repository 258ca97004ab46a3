// read_model (the ONNX reader that leaves initializer raw_data in the model's bytes) must
// see exactly the model protobuf's own parser sees, on good and bad bytes.
#include <gtest/gtest.h>

#include "onnx/model_reader.hpp"
#include "onnx_model_builder.hpp"

using namespace kiln;
using kiln::onnx_import::loaded_model;
using kiln::onnx_import::memory_model_bytes;
using kiln::onnx_import::read_model;
using test::onnx_model_builder;

namespace {

bool read_bytes(const std::string& bytes, loaded_model& out) {
    return read_model(memory_model_bytes(bytes.data(), bytes.size()), out);
}

// The raw_data read_model located, or nullopt.
std::optional<std::string> raw_of(const std::string& bytes, const loaded_model& loaded, std::size_t i) {
    const auto& range = loaded.initializer_raw_data.at(i);
    if (!range) return std::nullopt;
    return bytes.substr(range->offset, range->size);
}

// Checks read_model against ModelProto::ParseFromArray on `bytes`: same
// success, and on success the same model once the raw_data views are put back.
void expect_same_as_protobuf(const std::string& bytes) {
    onnx::ModelProto reference;
    bool reference_ok = reference.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
    loaded_model loaded;
    ASSERT_EQ(read_bytes(bytes, loaded), reference_ok);
    if (!reference_ok) return;
    ASSERT_EQ(loaded.model.has_graph(), reference.has_graph());
    if (!loaded.model.has_graph()) {
        EXPECT_TRUE(loaded.initializer_raw_data.empty());
        EXPECT_EQ(loaded.model.SerializeAsString(), reference.SerializeAsString());
        return;
    }
    auto& graph = *loaded.model.mutable_graph();
    ASSERT_LE(loaded.initializer_raw_data.size(), static_cast<std::size_t>(graph.initializer_size()));
    for (std::size_t i = 0; i < loaded.initializer_raw_data.size(); ++i) {
        const auto& range = loaded.initializer_raw_data[i];
        auto& tensor = *graph.mutable_initializer(static_cast<int>(i));
        EXPECT_FALSE(tensor.has_raw_data()) << "raw_data was copied after all";
        if (range) {
            ASSERT_LE(range->offset + range->size, bytes.size());
            tensor.set_raw_data(*raw_of(bytes, loaded, i));
        }
    }
    EXPECT_EQ(loaded.model.SerializeAsString(), reference.SerializeAsString());
}

// The wire encoding of a length-delimited field `number` holding `payload`.
std::string length_delimited(int number, const std::string& payload) {
    std::string out;
    auto varint = [&](std::uint64_t v) {
        for (; v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7f) | 0x80);
        out += static_cast<char>(v);
    };
    varint((static_cast<std::uint64_t>(number) << 3) | 2);
    varint(payload.size());
    return out + payload;
}

// A model with raw, typed and empty initializers around a node.
onnx_model_builder sample_model() {
    onnx_model_builder b;
    b.input("x", onnx::TensorProto::FLOAT, {2}).output("y");
    b.initializer("w", onnx::TensorProto::FLOAT, {2}).set_raw_data(test::raw_bytes<float>({1.5f, -2.0f}));
    b.float_initializer("v", {2}, {3.0f, 4.0f});
    b.initializer("empty", onnx::TensorProto::FLOAT, {0}).set_raw_data("");
    b.node("Mul", {"x", "w"}, {"xw"});
    b.node("Add", {"xw", "v"}, {"y"}, "add");
    return b;
}

}  // namespace

TEST(onnx_model_reader, leaves_raw_data_in_place_and_agrees_with_protobuf) {
    std::string bytes = sample_model().bytes();
    loaded_model loaded;
    ASSERT_TRUE(read_bytes(bytes, loaded));
    ASSERT_EQ(loaded.initializer_raw_data.size(), 3u);
    EXPECT_EQ(raw_of(bytes, loaded, 0), test::raw_bytes<float>({1.5f, -2.0f}));
    EXPECT_FALSE(loaded.initializer_raw_data[1].has_value());  // float_data, no raw_data field
    EXPECT_EQ(raw_of(bytes, loaded, 2), std::string());
    expect_same_as_protobuf(bytes);
}

TEST(onnx_model_reader, every_truncation_agrees_with_protobuf) {
    std::string bytes = sample_model().bytes();
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        SCOPED_TRACE(n);
        expect_same_as_protobuf(bytes.substr(0, n));
    }
}

TEST(onnx_model_reader, every_corrupted_byte_agrees_with_protobuf) {
    std::string bytes = sample_model().bytes();
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        for (char c : {'\x00', '\x07', '\x7f', '\xff'}) {
            SCOPED_TRACE(std::to_string(i) + ": " + std::to_string(static_cast<int>(c)));
            std::string corrupted = bytes;
            corrupted[i] = c;
            expect_same_as_protobuf(corrupted);
        }
    }
}

TEST(onnx_model_reader, repeated_fields_merge_as_in_protobuf) {
    // Two encodings of `graph` merge into one graph; a second raw_data replaces the first.
    onnx::ModelProto first;
    first.mutable_graph()->add_initializer()->set_raw_data("ab");
    onnx::ModelProto second = sample_model().model();
    expect_same_as_protobuf(first.SerializeAsString() + second.SerializeAsString());

    // A tensor encoded with raw_data twice (protobuf's own writer never does this).
    onnx::TensorProto tensor;
    tensor.set_name("t");
    tensor.set_raw_data("first");
    onnx::TensorProto later;
    later.set_raw_data("second");
    std::string graph = length_delimited(onnx::GraphProto::kInitializerFieldNumber,
                                         tensor.SerializeAsString() + later.SerializeAsString());
    std::string bytes = length_delimited(onnx::ModelProto::kGraphFieldNumber, graph);
    loaded_model loaded;
    ASSERT_TRUE(read_bytes(bytes, loaded));
    ASSERT_EQ(loaded.initializer_raw_data.size(), 1u);
    EXPECT_EQ(raw_of(bytes, loaded, 0), "second");
    expect_same_as_protobuf(bytes);
}
