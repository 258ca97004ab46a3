#pragma once
// Conversions between Kiln's IR values and the JSON of the .kiln metadata
// section. Readers raise kiln::error (parse_error) with a message saying what
// is wrong; the caller adds where (file, module, instruction).
#include <nlohmann/json.hpp>

#include "kiln/shape.hpp"
#include "kiln/compile_options.hpp"
#include "kiln/value.hpp"

namespace kiln::io {

// Ordered so that attribute maps keep their declaration order and output is
// byte-for-byte reproducible.
using json = nlohmann::ordered_json;

// Finite doubles are JSON numbers; NaN and infinities, which JSON lacks, are
// written as {"$float": "nan" | "inf" | "-inf"}.
json value_to_json(const value& v);

// The most levels of arrays and objects a .kiln metadata document may nest:
// the program, its modules, their instructions and attribute values nested
// as deep as to_value accepts, with room to spare.
constexpr int max_document_depth = 64;
// Parses a metadata document, refusing deeper nesting while it reads rather
// than after (a document nested 100,000 deep overflowed the stack).
json parse_document(const char* begin, const char* end);
value json_to_value(const json& j);

json shape_to_json(const shape& s);
// A dynamic shape is {"type", "dyn_dims": [{"min", "max", "optimals"}, ...]}
// (no lens or strides). Rejects unknown dtypes, malformed ranges, lens/strides
// of different length and shapes whose size in bytes overflows.
shape json_to_shape(const json& j);

json options_to_json(const compile_options& o);
compile_options json_to_options(const json& j);

// Typed access to members of a JSON object; missing or ill-typed members
// raise parse errors naming the member.
const json& member(const json& object, const char* key);
const json* optional_member(const json& object, const char* key);
std::string get_string(const json& object, const char* key);
std::uint64_t get_uint(const json& object, const char* key);
const json& get_array(const json& object, const char* key);
std::uint64_t as_uint(const json& j, const std::string& what);

}  // namespace kiln::io
