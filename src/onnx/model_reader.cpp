#include "onnx/model_reader.hpp"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/wire_format_lite.h>

#include <limits>
#include <string>

namespace kiln::onnx_import {

namespace {

using google::protobuf::internal::WireFormatLite;
using google::protobuf::io::CodedInputStream;

// Reads the message under `in`'s current limit in one pass, splitting it in
// two: each length-delimited entry of `field_number` goes to `take(in)`, which
// must read exactly that entry (a limit is pushed around it), and the
// encodings of all other fields are appended to `rest`. Together they still
// encode the message less that field: protobuf merges fields in order, so
// dropping one field's entries leaves the others' meaning as is.
template <class Take>
bool split_field(CodedInputStream& in, int field_number, std::string& rest, Take take) {
    google::protobuf::io::StringOutputStream sink(&rest);
    google::protobuf::io::CodedOutputStream out(&sink);
    for (;;) {
        const int start = in.CurrentPosition();
        const std::uint32_t tag = in.ReadTag();
        // 0 is the end of the message when no byte was read for it, and a
        // malformed or truncated tag otherwise.
        if (tag == 0) return in.CurrentPosition() == start;
        if (WireFormatLite::GetTagFieldNumber(tag) != field_number) {
            if (!WireFormatLite::SkipField(&in, tag, &out)) return false;
            continue;
        }
        // Another wire type would make protobuf keep the entry as an unknown field.
        if (WireFormatLite::GetTagWireType(tag) != WireFormatLite::WIRETYPE_LENGTH_DELIMITED) return false;
        std::uint32_t length = 0;
        // An entry longer than what holds it is malformed (a pushed limit would only clip it).
        if (!in.ReadVarint32(&length) || length > static_cast<std::uint32_t>(in.BytesUntilLimit())) return false;
        const auto limit = in.PushLimit(static_cast<int>(length));
        if (!take(in, static_cast<int>(length)) || in.BytesUntilLimit() != 0) return false;
        in.PopLimit(limit);
    }
}

template <class Message>
bool parse_part(const std::string& bytes, Message& message) {
    return message.ParseFromString(bytes);
}

// The fast path: false when the bytes are not the one-graph model it expects.
bool read_split(const model_bytes& bytes, loaded_model& out) {
    auto stream = bytes.stream();
    CodedInputStream in(stream.get());
    in.SetTotalBytesLimit(std::numeric_limits<int>::max());
    in.PushLimit(static_cast<int>(bytes.size()));  // what split_field checks entries' lengths against
    std::string model_rest;
    std::string graph_rest;
    std::vector<std::string> tensor_rests;
    int graphs = 0;
    auto read_tensor = [&](CodedInputStream& tensor, int) {
        tensor_rests.emplace_back();
        std::optional<byte_range> raw;
        const bool ok = split_field(
            tensor, onnx::TensorProto::kRawDataFieldNumber, tensor_rests.back(),
            [&](CodedInputStream& payload, int length) {
                // raw_data is a singular field: the last entry wins, as in protobuf.
                raw = byte_range{static_cast<std::size_t>(payload.CurrentPosition()), static_cast<std::size_t>(length)};
                return payload.Skip(length);
            });
        out.initializer_raw_data.push_back(raw);
        return ok;
    };
    auto read_graph = [&](CodedInputStream& graph, int) {
        return ++graphs == 1 && split_field(graph, onnx::GraphProto::kInitializerFieldNumber, graph_rest, read_tensor);
    };
    if (!split_field(in, onnx::ModelProto::kGraphFieldNumber, model_rest, read_graph) || graphs != 1) return false;
    // A read that stopped early (a file cut short at a field's end) looks like the end.
    if (static_cast<std::size_t>(in.CurrentPosition()) != bytes.size()) return false;
    if (!parse_part(model_rest, out.model)) return false;
    auto& graph = *out.model.mutable_graph();
    if (!parse_part(graph_rest, graph)) return false;
    for (const std::string& tensor : tensor_rests)
        if (!parse_part(tensor, *graph.add_initializer())) return false;
    return true;
}
}  // namespace

bool read_model(const model_bytes& bytes, loaded_model& out) {
    if (bytes.size() > static_cast<std::size_t>(std::numeric_limits<int>::max())) return false;
    if (read_split(bytes, out)) return true;
    // Whatever the split does not handle, protobuf decides as it always has.
    out = loaded_model{};
    auto stream = bytes.stream();
    return out.model.ParseFromZeroCopyStream(stream.get()) &&
           static_cast<std::size_t>(stream->ByteCount()) == bytes.size();
}

}  // namespace kiln::onnx_import
