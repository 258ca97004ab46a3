// Reading .kiln files. Every check that can fail on a malformed file happens
// here, before the data reaches the IR, and raises a parse_error naming the
// file, the module and the instruction.
#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>

#include "io/dynamic_source.hpp"
#include "io/file_header.hpp"
#include "io/json_codec.hpp"
#include "io/mapped_image.hpp"
#include "io/packed_weights_owner.hpp"
#include "kiln/op_registry.hpp"
#include "kiln/serialize.hpp"
#include "kiln/verifier.hpp"
#include "kiln/version.hpp"

namespace kiln {

namespace {

[[noreturn]] void bad(const std::string& what) {
    fail(error_kind::parse_error, what);
}

// The data section of the image being loaded.
struct data_section {
    const unsigned char* bytes;
    std::uint64_t size;
    // Keeps `bytes` alive when they are a mapped file, whose literals then
    // point into it; null for a buffer the caller owns, which is copied.
    std::shared_ptr<void> owner;
    // Whether literals may be stored packed (only a compiled program's: the
    // target restores them when it lowers the program), and whether kernels
    // may use them as they are (laid out for this machine and Kiln version).
    bool packed_allowed = false;
    bool packed_adoptable = false;
};

// A literal stored in a kernel's layout: its packed bytes, which the target
// checks against the recorded layout when it lowers the program.
literal read_packed_literal(const io::json& j, const shape& s, const data_section& data, std::uint64_t offset,
                            std::uint64_t size) {
    auto form = std::make_shared<packed_constant>();
    form->layout = io::json_to_value(io::member(j, "packed"));
    form->adoptable = data.packed_adoptable;
    const shape bytes{dtype::uint8_type, {size}};
    if (data.owner != nullptr) {
        form->bytes = argument(bytes, data.owner, const_cast<unsigned char*>(data.bytes + offset));
    } else {
        form->bytes = argument(bytes);
        std::memcpy(form->bytes.data(), data.bytes + offset, size);
    }
    return literal::packed(s, std::move(form));
}

literal read_literal(const io::json& j, const shape& s, const data_section& data) {
    std::uint64_t offset = io::get_uint(j, "offset");
    std::uint64_t size = io::get_uint(j, "bytes");
    if (!s.standard()) bad("literal shape " + to_string(s) + " is not standard");
    const bool packed = io::optional_member(j, "packed") != nullptr;
    if (packed && !data.packed_allowed) bad("a literal is stored packed, but the program is not compiled");
    if (packed && size == 0) bad("packed literal holds no bytes");
    if (size != s.bytes() && !packed)
        bad("literal holds " + std::to_string(size) + " bytes but its shape " + to_string(s) + " needs " +
            std::to_string(s.bytes()));
    if (offset % io::data_alignment != 0) bad("literal offset " + std::to_string(offset) + " is not 64-byte aligned");
    if (offset > data.size || size > data.size - offset)
        bad("literal bytes [" + std::to_string(offset) + ", +" + std::to_string(size) +
            ") lie outside the data section of " + std::to_string(data.size) + " bytes");
    if (packed) return read_packed_literal(j, s, data, offset, size);
    // Any other byte in a bool is undefined behaviour once read as bool.
    if (s.type() == dtype::bool_type)
        for (std::size_t i = 0; i < size; ++i)
            if (data.bytes[offset + i] > 1) bad("bool literal holds a byte that is neither 0 nor 1");
    if (data.owner != nullptr && size > 0)
        return literal::sharing(argument(s, data.owner, const_cast<unsigned char*>(data.bytes + offset)));
    argument a(s);
    if (size > 0) std::memcpy(a.data(), data.bytes + offset, size);
    return literal(a);
}

std::vector<module_ref> read_module_inputs(const io::json& j, program& p) {
    std::vector<module_ref> out;
    const io::json* mods = io::optional_member(j, "modules");
    if (mods == nullptr) return out;
    if (!mods->is_array()) bad("'modules' must be an array");
    for (const auto& name : *mods) {
        if (!name.is_string()) bad("'modules' must hold module names");
        module* m = p.get_module(name.get<std::string>());
        if (m == nullptr) bad("refers to module '" + name.get<std::string>() + "', which the file does not define");
        out.push_back(m);
    }
    return out;
}

instruction_ref read_instruction(const io::json& j, module& m, program& p, const std::vector<instruction_ref>& defined,
                                 const data_section& data) {
    if (!j.is_object()) bad("an instruction must be an object");
    std::string op_name = io::get_string(j, "op");
    if (op_name == "@param")
        return m.add_parameter(io::get_string(j, "name"), io::json_to_shape(io::member(j, "shape")));
    if (op_name == "@literal") {
        shape s = io::json_to_shape(io::member(j, "shape"));
        return m.add_literal(read_literal(j, s, data));
    }

    std::vector<instruction_ref> inputs;
    for (const auto& in : io::get_array(j, "inputs")) {
        std::uint64_t k = io::as_uint(in, "inputs");
        if (k >= defined.size()) bad("input " + std::to_string(k) + " does not refer to an earlier instruction");
        inputs.push_back(defined[k]);
    }
    if (op_name == "@return") return m.add_return(inputs);

    value attrs;
    if (const io::json* a = io::optional_member(j, "attributes")) attrs = io::json_to_value(*a);
    operation op = make_op(op_name, attrs);
    instruction_ref ins = m.add_instruction(op, inputs, read_module_inputs(j, p));
    shape recorded = io::json_to_shape(io::member(j, "shape"));
    if (ins->get_shape() != recorded)
        bad("recorded result shape " + to_string(recorded) + " differs from the computed " +
            to_string(ins->get_shape()));
    return ins;
}

// The algorithm a compiled file recorded for each instruction, by instruction.
using recorded_algorithms = std::unordered_map<const instruction*, std::string>;

void read_module(const io::json& j, module& m, program& p, const data_section& data, recorded_algorithms& algorithms) {
    const io::json& instructions = io::get_array(j, "instructions");
    std::vector<instruction_ref> defined;
    defined.reserve(instructions.size());
    for (const auto& ins : instructions) {
        try {
            defined.push_back(read_instruction(ins, m, p, defined, data));
            if (io::optional_member(ins, "origin") != nullptr)
                defined.back()->set_origin(io::get_string(ins, "origin"));
            // Optional, and only advice: a malformed one is the default rule (lowering warns about unusable names).
            if (const io::json* a = io::optional_member(ins, "algorithm"); a != nullptr && a->is_string())
                algorithms[&*defined.back()] = a->get<std::string>();
        } catch (const error& e) {
            bad("module '" + m.name() + "', instruction " + std::to_string(defined.size()) + ": " + e.what());
        }
    }
}

// Bounds the recursion below on malformed files.
constexpr std::size_t max_module_nesting = 256;

// Module indices in an order where every module comes after the modules its
// instructions take as arguments: an instruction's shape needs their outputs.
std::vector<std::size_t> reading_order(const io::json& modules) {
    std::map<std::string, std::size_t> index;
    for (std::size_t i = 0; i < modules.size(); ++i) index[io::get_string(modules[i], "name")] = i;
    std::vector<std::vector<std::size_t>> uses(modules.size());
    for (std::size_t i = 0; i < modules.size(); ++i)
        for (const auto& ins : io::get_array(modules[i], "instructions")) {
            const io::json* mods = ins.is_object() ? io::optional_member(ins, "modules") : nullptr;
            if (mods == nullptr || !mods->is_array()) continue;  // read_instruction reports it
            for (const auto& name : *mods)
                if (name.is_string() && index.count(name.get<std::string>()))
                    uses[i].push_back(index.at(name.get<std::string>()));
        }
    enum class mark { unseen, active, done };
    std::vector<mark> marks(modules.size(), mark::unseen);
    std::vector<std::size_t> order;
    std::size_t depth = 0;
    std::function<void(std::size_t)> visit = [&](std::size_t i) {
        if (++depth > max_module_nesting)
            bad("modules nested more than " + std::to_string(max_module_nesting) + " levels deep");
        marks[i] = mark::active;
        for (std::size_t u : uses[i]) {
            if (marks[u] == mark::active)
                bad("module '" + io::get_string(modules[u], "name") +
                    "' takes itself as an argument (through module '" + io::get_string(modules[i], "name") + "')");
            if (marks[u] == mark::unseen) visit(u);
        }
        marks[i] = mark::done;
        order.push_back(i);
        --depth;
    };
    for (std::size_t i = 0; i < modules.size(); ++i)
        if (marks[i] == mark::unseen) visit(i);
    return order;
}

// "1.2.3" as numbers, or nothing when it is not that form.
std::optional<std::array<unsigned, 3>> parse_version(const std::string& text) {
    std::array<unsigned, 3> v{};
    char end = 0;
    if (std::sscanf(text.c_str(), "%u.%u.%u%c", &v[0], &v[1], &v[2], &end) != 3) return std::nullopt;
    return v;
}

// The format version decides whether a file reads; the Kiln that wrote it is
// checked too, as a newer one may record kernel algorithms or options this
// build does not know (they fall back to the defaults): it loads, with a warning.
void check_producer(const io::json& meta, std::uint32_t format) {
    const io::json* producer = io::optional_member(meta, "producer");
    if (producer == nullptr) return;  // hand-built images record none
    static const std::string prefix = "kiln ";
    const std::string text = producer->is_string() ? producer->get<std::string>() : producer->dump();
    const auto written = text.rfind(prefix, 0) == 0 ? parse_version(text.substr(prefix.size())) : std::nullopt;
    if (!written) bad("'producer' is " + text + ", not \"kiln <major>.<minor>.<patch>\"");
    const auto here = parse_version(version);
    if (here && *written > *here)
        std::cerr << "kiln: warning: the file was written by " << text << ", newer than this kiln " << version
                  << "; its format version " << format << " is readable, so it loads\n";
}

// From format 2 on the body checksum stops at the data, whose own checksum the metadata records.
void check_data(const io::json& meta, const io::file_header& h, const data_section& data, bool verify) {
    if (h.version < io::first_version_with_data_checksum) return;
    const std::uint64_t recorded = io::get_uint(meta, "data_crc32");
    if (verify && recorded != io::checksum(data.bytes, data.size))
        bad("the weights are corrupt (data section checksum mismatch)");
}

// Whether this machine's kernels may use the file's packed weights as they
// are; warns when the file has some laid out for another machine or Kiln.
bool packed_weights_adoptable(const io::json& meta) {
    const io::json* compiled = io::optional_member(meta, "compiled");
    const io::json* owner = compiled != nullptr ? io::optional_member(*compiled, "packed_for") : nullptr;
    if (owner == nullptr) return false;
    const std::string recorded = io::get_string(*compiled, "packed_for");
    const std::string here = io::packed_weights_owner(get_target(io::get_string(*compiled, "target")));
    if (recorded == here) return true;
    std::cerr << "kiln: warning: the file's pre-packed weights were laid out for " << recorded << "; this is " << here
              << ": they are restored and packed again, which makes loading slower\n";
    return false;
}

program read_program(const io::json& meta, const io::file_header& h, const data_section& given, bool verify_data) {
    if (!meta.is_object()) bad("the metadata is not a JSON object");
    check_producer(meta, h.version);
    check_data(meta, h, given, verify_data);
    data_section data = given;
    data.packed_allowed = io::optional_member(meta, "compiled") != nullptr && io::optional_member(meta, "dynamic") == nullptr;
    data.packed_adoptable = data.packed_allowed && packed_weights_adoptable(meta);
    const io::json& modules = io::get_array(meta, "modules");
    program p;
    // Create every module first: instructions may refer to modules listed after them.
    std::vector<module*> targets;
    for (const auto& mj : modules) {
        std::string name = io::get_string(mj, "name");
        module* m = p.get_module(name);
        if (m == nullptr) {
            m = p.create_module(name);
        } else if (name != "main" || std::find(targets.begin(), targets.end(), m) != targets.end()) {
            bad("module '" + name + "' is defined twice");
        }
        targets.push_back(m);
    }
    recorded_algorithms algorithms;
    recorded_algorithms ignored;  // sub-modules' kernels follow the default rule
    for (std::size_t i : reading_order(modules))
        read_module(modules[i], *targets[i], p, data, targets[i] == p.get_main_module() ? algorithms : ignored);
    verify_program(p, "in the loaded program");

    if (const io::json* dynamic = io::optional_member(meta, "dynamic")) {
        std::uint64_t offset = io::get_uint(*dynamic, "offset");
        std::uint64_t size = io::get_uint(*dynamic, "bytes");
        if (offset > data.size || size > data.size - offset) bad("the dynamic program's model lies outside the data section");
        io::restore_source(p, *dynamic, std::string(reinterpret_cast<const char*>(data.bytes + offset), size));
    }
    const io::json* compiled = io::optional_member(meta, "compiled");
    if ((compiled != nullptr) != ((h.flags & io::flag_compiled) != 0))
        bad("the header and the metadata disagree on whether the program is compiled");
    if (compiled != nullptr) {
        std::string target = io::get_string(*compiled, "target");
        compile_options options = io::json_to_options(io::member(*compiled, "options"));
        const auto names = p.get_main_module()->instruction_names();
        for (const auto& [ins, algorithm] : algorithms)
            if (auto name = names.find(ins); name != names.end()) options.pinned_algorithms[name->second] = algorithm;
        // A dynamic program keeps its source, not its specialisations: compile them again.
        if (p.is_dynamic())
            p.compile(get_target(target), options);
        else
            p.lower_compiled(target, options);
    }
    return p;
}

// Parses the metadata and builds the program; errors name `source`.
program load_parts(const io::file_header& h, const char* metadata, const data_section& data, bool verify_data,
                   const std::string& source) {
    try {
        io::json meta;
        try {
            meta = io::parse_document(metadata, metadata + h.metadata_size);
        } catch (const io::json::exception& e) {
            bad(std::string("the metadata is not valid JSON: ") + e.what());
        }
        return read_program(meta, h, data, verify_data);
    } catch (const error& e) {
        io::fail_parse(source, e.what());
    } catch (const std::bad_alloc&) {
        io::fail_parse(source, "out of memory while loading");
    } catch (const std::exception& e) {
        io::fail_parse(source, e.what());
    }
}

program load_image(const unsigned char* bytes, std::size_t size, const std::string& source) {
    io::file_header h = io::read_header(bytes, size, source);
    return load_parts(h, reinterpret_cast<const char*>(bytes + h.metadata_offset),
                      data_section{bytes + h.data_offset, h.data_size, nullptr}, true, source);
}

}  // namespace

program load_buffer(const void* data, std::size_t size) {
    if (data == nullptr && size > 0) fail("load_buffer: null data");
    static const unsigned char empty = 0;
    return load_image(data ? static_cast<const unsigned char*>(data) : &empty, size, "buffer");
}

program load(const std::string& path, const load_options& options) {
    io::mapped_image file(path);
    // The header and metadata are read with pread and checked against the
    // size the file had when mapped before any weight is touched through the
    // mapping: a file cut short is an error here, never a SIGBUS. (The cache
    // replaces entries by rename, so files in use are never cut short.)
    // The header and the start of the metadata, which names the producer of a file too new to read.
    constexpr std::size_t head_bytes = io::header_size + 128;
    std::vector<unsigned char> head(std::min(file.size(), head_bytes));
    file.read(0, head.size(), head.data());
    io::file_header h = io::parse_header(head.data(), head.size(), file.size(), path);
    if (h.version < io::first_version_with_data_checksum) {
        // Version 1's checksum covers the weights: read the whole file, as before.
        std::vector<unsigned char> bytes(file.size());
        file.read(0, bytes.size(), bytes.data());
        return load_image(bytes.data(), bytes.size(), path);
    }
    std::vector<unsigned char> prefix(h.data_offset);
    file.read(0, prefix.size(), prefix.data());
    io::check_body(h, prefix.data(), path);
    return load_parts(h, reinterpret_cast<const char*>(prefix.data() + h.metadata_offset),
                      data_section{file.data() + h.data_offset, h.data_size, file.owner()}, options.verify_weights,
                      path);
}

}  // namespace kiln
