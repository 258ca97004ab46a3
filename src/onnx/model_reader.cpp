#include "onnx/model_reader.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>

#include <limits>
#include <string>

namespace kiln::onnx_import {

namespace {

using google::protobuf::internal::WireFormatLite;

// The encoding of one message split in two: the payloads of one
// length-delimited field and the encodings of all its other fields, which
// together still encode the message less that field (protobuf merges fields
// in order, so dropping one field's entries leaves the others' meaning as is).
struct split_message {
    std::string rest;
    std::vector<std::string_view> payloads;
};

bool split_field(std::string_view bytes, int field_number, split_message& out) {
    if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) return false;
    const auto* begin = reinterpret_cast<const std::uint8_t*>(bytes.data());
    google::protobuf::io::CodedInputStream in(begin, static_cast<int>(bytes.size()));
    for (;;) {
        const auto start = static_cast<std::size_t>(in.CurrentPosition());
        if (start == bytes.size()) return true;
        const std::uint32_t tag = in.ReadTag();
        if (tag == 0) return false;
        if (WireFormatLite::GetTagFieldNumber(tag) != field_number) {
            if (!WireFormatLite::SkipField(&in, tag)) return false;
            out.rest.append(bytes.substr(start, static_cast<std::size_t>(in.CurrentPosition()) - start));
            continue;
        }
        // Another wire type would make protobuf keep the entry as an unknown field.
        if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) return false;
        std::uint32_t length = 0;
        if (!in.ReadVarint32(&length)) return false;
        const auto at = static_cast<std::size_t>(in.CurrentPosition());
        if (length > bytes.size() - at) return false;
        out.payloads.push_back(bytes.substr(at, length));
        if (!in.Skip(static_cast<int>(length))) return false;
    }
}

template <class Message>
bool parse_part(std::string_view bytes, Message& message) {
    return bytes.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()) &&
           message.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

// The fast path: false when the bytes are not the one-graph model it expects
// or do not split cleanly.
bool read_split(std::string_view bytes, loaded_model& out) {
    split_message model;
    if (!split_field(bytes, onnx::ModelProto::kGraphFieldNumber, model) || model.payloads.size() != 1) return false;
    split_message graph;
    if (!split_field(model.payloads[0], onnx::GraphProto::kInitializerFieldNumber, graph)) return false;
    if (!parse_part(model.rest, out.model) || !parse_part(graph.rest, *out.model.mutable_graph())) return false;
    for (std::string_view encoded : graph.payloads) {
        split_message tensor;
        if (!split_field(encoded, onnx::TensorProto::kRawDataFieldNumber, tensor)) return false;
        if (!parse_part(tensor.rest, *out.model.mutable_graph()->add_initializer())) return false;
        // raw_data is a singular field: the last entry wins, as in protobuf.
        out.initializer_raw_data.push_back(tensor.payloads.empty() ? std::nullopt
                                                                   : std::optional(tensor.payloads.back()));
    }
    return true;
}
}  // namespace

bool read_model(const void* data, std::size_t size, loaded_model& out) {
    const std::string_view bytes(static_cast<const char*>(data), size);
    if (read_split(bytes, out)) return true;
    // Whatever the split does not handle, protobuf decides as it always has.
    out = loaded_model{};
    return parse_part(bytes, out.model);
}

}  // namespace kiln::onnx_import
