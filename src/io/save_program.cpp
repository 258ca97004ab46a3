// Writing programs as .kiln files (layout in file_header.hpp and serialize.hpp).
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <unordered_map>

#include "io/dynamic_source.hpp"
#include "io/file_header.hpp"
#include "io/json_codec.hpp"
#include "io/packed_weights_owner.hpp"
#include "io/content_hash.hpp"
#include "io/program_fingerprint.hpp"
#include "kiln/serialize.hpp"
#include "kiln/version.hpp"

namespace kiln {

namespace {

// A literal's values and where they go in the data section. Held here, as
// a handed-over literal restores them into a buffer only the saver keeps.
struct data_entry {
    argument values;
    std::size_t size;
    std::uint64_t offset;
};

class metadata_writer {
public:
    io::json program_json(const program& p) {
        // The algorithm each main-module instruction runs (tuned or by rule), so
        // that loading builds the same kernels without timing anything. A
        // dynamic program keeps no specialisation, so it has none.
        if (p.is_compiled() && !p.is_dynamic())
            for (const auto& c : p.kernel_choices()) algorithms_[c.instruction] = c.algorithm;
        main_ = p.get_main_module();
        // A dynamic program's modules are compiled again on load, by passes that read plain values.
        store_packed_ = p.is_compiled() && !p.is_dynamic();
        io::json modules = io::json::array();
        for (const module* m : p.get_modules()) modules.push_back(module_json(*m));
        io::json meta{{"producer", std::string("kiln ") + version}, {"modules", std::move(modules)}};
        if (p.is_compiled()) {
            meta["compiled"] = {{"target", p.target_name()}, {"options", io::options_to_json(p.get_compile_options())}};
            // Packed weights are laid out for this machine's kernels: loading elsewhere repacks them.
            if (packed_ > 0) meta["compiled"]["packed_for"] = io::packed_weights_owner(get_target(p.target_name()));
        }
        if (p.get_specialiser() != nullptr) {
            io::source_record source = io::record_source(p);
            model_ = std::move(source.model);
            argument bytes(shape{dtype::uint8_type, {model_.size()}}, model_.data());
            data_entry e{bytes, model_.size(), io::align_up(data_size_)};
            data_size_ = e.offset + e.size;
            source.meta["offset"] = e.offset;
            source.meta["bytes"] = e.size;
            data_.push_back(std::move(e));
            meta["dynamic"] = std::move(source.meta);
        }
        return meta;
    }
    const std::vector<data_entry>& data() const { return data_; }
    std::uint64_t data_size() const { return data_size_; }

private:
    io::json module_json(const module& m) {
        std::unordered_map<const instruction*, std::size_t> index;
        std::unordered_map<const instruction*, std::string> names;
        if (&m == main_ && !algorithms_.empty()) names = m.instruction_names();
        io::json instructions = io::json::array();
        for (const auto& ins : m) {
            index.emplace(&ins, index.size());
            instructions.push_back(instruction_json(ins, index));
            if (auto name = names.find(&ins); name != names.end())
                if (auto a = algorithms_.find(name->second); a != algorithms_.end())
                    instructions.back()["algorithm"] = a->second;
        }
        return {{"name", m.name()}, {"instructions", std::move(instructions)}};
    }

    io::json instruction_json(const instruction& ins,
                              const std::unordered_map<const instruction*, std::size_t>& index) {
        io::json j{{"op", ins.name()}};
        if (ins.is_param()) {
            j["name"] = ins.param_name();
        } else if (ins.is_literal()) {
            // A compiled program's kernels may hold a literal packed: that is what a load can use as it is.
            auto form = store_packed_ ? ins.get_literal().packed_form() : nullptr;
            argument a = form != nullptr ? form->bytes : ins.get_literal().get_argument();
            const std::size_t bytes = a.get_shape().bytes();
            data_entry e{std::move(a), bytes, io::align_up(data_size_)};
            data_size_ = e.offset + e.size;
            j["offset"] = e.offset;
            j["bytes"] = e.size;
            if (form != nullptr) {
                j["packed"] = io::value_to_json(form->layout);
                ++packed_;
            }
            data_.push_back(std::move(e));
        } else {
            value attrs = ins.get_operator().attributes();
            if (!(attrs.is_map() && attrs.as_map().empty())) j["attributes"] = io::value_to_json(attrs);
            io::json inputs = io::json::array();
            for (const auto& in : ins.inputs()) inputs.push_back(index.at(&*in));
            j["inputs"] = std::move(inputs);
            if (!ins.module_inputs().empty()) {
                io::json mods = io::json::array();
                for (const module* sub : ins.module_inputs()) mods.push_back(sub->name());
                j["modules"] = std::move(mods);
            }
        }
        if (!ins.is_return()) j["shape"] = io::shape_to_json(ins.get_shape());
        // Optional: files without it (written before origins existed) load with none.
        if (!ins.origin().empty()) j["origin"] = ins.origin();
        return j;
    }

    std::vector<data_entry> data_;
    std::uint64_t data_size_ = 0;
    std::string model_;  // a dynamic program's source model, which data_ points into
    std::map<std::string, std::string> algorithms_;  // by instruction name
    const module* main_ = nullptr;
    bool store_packed_ = false;
    std::size_t packed_ = 0;  // literals stored packed
};

// The checksum of the data section these entries fill (zero padding between them).
std::uint32_t data_checksum(const std::vector<data_entry>& entries) {
    static const unsigned char zeros[io::data_alignment] = {};
    std::uint32_t crc = 0;
    std::uint64_t end = 0;
    for (const auto& e : entries) {
        crc = io::checksum(zeros, e.offset - end, crc);
        crc = io::checksum(reinterpret_cast<const unsigned char*>(e.values.data()), e.size, crc);
        end = e.offset + e.size;
    }
    return crc;
}

}  // namespace

std::string io::program_fingerprint(const program& p) {
    metadata_writer writer;
    std::string text = writer.program_json(p).dump();
    // 128 bits of the weights, each literal's bytes at its place in the data
    // section (the offsets are in the metadata): a 32-bit sum alone would let
    // two fine-tunes of one graph share an entry once in 4e9 pairs.
    io::content_hash weights;
    for (const auto& e : writer.data()) weights.add(e.values.data(), e.size);
    return text + "\ndata " + std::to_string(writer.data_size()) + " hash " + std::to_string(weights.first()) + " " +
           std::to_string(weights.second());
}

std::string save_buffer(const program& p) {
    metadata_writer writer;
    io::json meta = writer.program_json(p);
    meta["data_crc32"] = data_checksum(writer.data());
    std::string metadata = meta.dump();

    io::file_header h;
    h.version = kiln_format_version;
    h.flags = p.is_compiled() ? io::flag_compiled : 0;
    h.metadata_offset = io::header_size;
    h.metadata_size = metadata.size();
    h.data_offset = io::align_up(h.metadata_offset + h.metadata_size);
    h.data_size = writer.data_size();

    // Zero-filled, so alignment padding is deterministic.
    std::string out(h.data_offset + h.data_size, '\0');
    auto* bytes = reinterpret_cast<unsigned char*>(out.data());
    std::memcpy(bytes + h.metadata_offset, metadata.data(), metadata.size());
    for (const auto& e : writer.data())
        if (e.size > 0) std::memcpy(bytes + h.data_offset + e.offset, e.values.data(), e.size);
    io::write_header(h, bytes, out.size());
    return out;
}

void save(const program& p, const std::string& path) {
    std::string bytes = save_buffer(p);
    // Write beside the target and rename, so a failed save never leaves a
    // half-written file at `path` and a reader never sees one. The name is
    // this thread's own: processes filling one compile cache entry at once
    // must not write into the same temporary file.
    std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" +
                      std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f) fail(error_kind::runtime, "cannot write '" + path + "': " + std::strerror(errno));
        f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
        f.close();
        if (!f) {
            std::error_code ignored;
            std::filesystem::remove(tmp, ignored);
            fail(error_kind::runtime, "cannot write '" + path + "': " + std::strerror(errno));
        }
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) {
        std::filesystem::remove(tmp, ec);
        fail(error_kind::runtime, "cannot write '" + path + "': " + ec.message());
    }
}

}  // namespace kiln
