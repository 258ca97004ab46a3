// Loading a .kiln file maps it: weights point into the mapping, which the
// program keeps alive; damage is reported, never a crash; format 1 still loads.
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kiln/kiln.hpp"

using namespace kiln;

namespace {

constexpr std::size_t weight_count = 1 << 18;  // 1 MiB of float weights

// x + w, w a large literal that the add kernel reads in place (keeps no copy).
program weighted_program() {
    program p;
    module* m = p.get_main_module();
    shape s{dtype::float_type, {weight_count}};
    auto x = m->add_parameter("x", s);
    auto w = m->add_literal(literal(s, [](std::byte* out) {
        auto* f = reinterpret_cast<float*>(out);
        for (std::size_t i = 0; i < weight_count; ++i) f[i] = static_cast<float>(i % 1000) * 0.5f;
    }));
    m->add_return({m->add_instruction(make_op("add"), {x, w})});
    return p;
}

parameter_map weighted_inputs() {
    return {{"x", generate_argument(shape{dtype::float_type, {weight_count}}, 3)}};
}

std::filesystem::path temp_path(const std::string& name) {
    return std::filesystem::temp_directory_path() / ("kiln_test_mapped_" + std::to_string(::getpid()) + "_" + name);
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

bool mapped_in_this_process(const std::filesystem::path& path) {
    std::ifstream maps("/proc/self/maps");
    std::stringstream text;
    text << maps.rdbuf();
    return text.str().find(path.string()) != std::string::npos;
}

void expect_identical(const std::vector<argument>& a, const std::vector<argument>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].get_shape(), b[i].get_shape());
        EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].get_shape().bytes()), 0) << "output " << i;
    }
}

std::uint64_t u64_at(const std::string& image, std::size_t at) {
    std::uint64_t v = 0;
    std::memcpy(&v, image.data() + at, 8);
    return v;
}

// The same program in format version 1: no "data_crc32" in the metadata and
// a body checksum over everything after the header.
std::string as_format_1(const std::string& image) {
    std::string meta = image.substr(64, u64_at(image, 24));
    const auto at = meta.find(",\"data_crc32\":");
    EXPECT_NE(at, std::string::npos) << meta;
    meta.erase(at, meta.find_first_of(",}", at + 1) - at);
    const std::uint64_t data_offset = u64_at(image, 32), data_size = u64_at(image, 40);
    const std::uint64_t new_data_offset = (64 + meta.size() + 63) / 64 * 64;
    std::string out(new_data_offset + data_size, '\0');
    std::memcpy(out.data(), image.data(), 64);
    std::memcpy(out.data() + 64, meta.data(), meta.size());
    std::memcpy(out.data() + new_data_offset, image.data() + data_offset, data_size);
    const std::uint32_t version = 1;
    const std::uint64_t fields[] = {meta.size(), new_data_offset, data_size, out.size()};
    std::memcpy(out.data() + 8, &version, 4);
    for (int i = 0; i < 4; ++i) std::memcpy(out.data() + 24 + 8 * i, &fields[i], 8);
    const auto* bytes = reinterpret_cast<const unsigned char*>(out.data());
    const std::uint32_t body = ::crc32(0, bytes + 64, static_cast<unsigned>(out.size() - 64));
    std::memcpy(out.data() + 56, &body, 4);
    const std::uint32_t head = ::crc32(0, bytes, 60);
    std::memcpy(out.data() + 60, &head, 4);
    return out;
}

void expect_parse_error_loading(const std::filesystem::path& path, const std::string& needle,
                                const load_options& options = {}) {
    try {
        load(path.string(), options);
        FAIL() << "expected a parse error mentioning '" << needle << "'";
    } catch (const error& e) {
        EXPECT_EQ(e.kind(), error_kind::parse_error) << e.what();
        EXPECT_NE(std::string(e.what()).find(path.string()), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
}

}  // namespace

TEST(serialize_mapped, weights_point_into_the_mapping_which_the_program_keeps_alive) {
    program p = weighted_program();
    p.compile(get_target("cpu"));
    const auto expected = p.eval(weighted_inputs());
    const auto path = temp_path("alive.kiln");
    save(p, path.string());
    {
        program loaded = load(path.string());
        EXPECT_TRUE(mapped_in_this_process(path));
        const instruction& w = *std::prev(std::prev(loaded.get_main_module()->end(), 2));
        ASSERT_TRUE(w.is_literal());
        // Not a private copy: its bytes are the file's data section, 64-byte aligned.
        const argument values = w.get_literal().get_argument();
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(values.data()) % 64, 0u);
        std::filesystem::remove(path);  // the mapping outlives the name
        expect_identical(loaded.eval(weighted_inputs()), expected);
        program copy = loaded;  // copies share the literal, and so the mapping
        loaded = program();
        expect_identical(copy.eval(weighted_inputs()), expected);
    }
    EXPECT_FALSE(mapped_in_this_process(path));
}

TEST(serialize_mapped, a_cpu_program_reloads_bit_identical) {
    program p = weighted_program();
    p.compile(get_target("cpu"));
    const auto path = temp_path("same.kiln");
    save(p, path.string());
    program loaded = load(path.string(), load_options{true});
    expect_identical(loaded.eval(weighted_inputs()), p.eval(weighted_inputs()));
    std::filesystem::remove(path);
}

TEST(serialize_mapped, a_file_cut_short_is_an_error_not_a_crash) {
    program p = weighted_program();
    p.compile(get_target("cpu"));
    const std::string bytes = save_buffer(p);
    const auto path = temp_path("short.kiln");
    for (std::size_t keep : {bytes.size() - 1, bytes.size() - 4096, bytes.size() / 2, std::size_t{200}})
        for (bool verify : {false, true}) {
            write_file(path, bytes.substr(0, keep));
            expect_parse_error_loading(path, "truncated", load_options{verify});
        }
    std::filesystem::remove(path);
}

TEST(serialize_mapped, damaged_weights_are_found_when_asked_and_damaged_metadata_always) {
    program p = weighted_program();
    p.compile(get_target("ref"));
    std::string bytes = save_buffer(p);
    const auto path = temp_path("damaged.kiln");
    std::string weights = bytes;
    weights[weights.size() - 5] ^= 0x10;
    write_file(path, weights);
    expect_parse_error_loading(path, "the weights are corrupt (data section checksum mismatch)", load_options{true});
    EXPECT_NO_THROW(load(path.string()));  // not read unless asked: loading stays fast
    EXPECT_THROW(load_buffer(weights.data(), weights.size()), error);  // a buffer is always checked
    std::string metadata = bytes;
    metadata[80] ^= 0x10;
    write_file(path, metadata);
    expect_parse_error_loading(path, "checksum mismatch");
    std::filesystem::remove(path);
}

TEST(serialize_mapped, format_1_files_still_load) {
    for (const char* target : {"ref", "cpu"}) {
        program p = weighted_program();
        p.compile(get_target(target));
        const std::string old = as_format_1(save_buffer(p));
        ASSERT_EQ(old[8], 1);
        expect_identical(load_buffer(old.data(), old.size()).eval(weighted_inputs()), p.eval(weighted_inputs()));
        const auto path = temp_path("v1.kiln");
        write_file(path, old);
        expect_identical(load(path.string()).eval(weighted_inputs()), p.eval(weighted_inputs()));
        // Its one checksum covers the weights, so damage to them is found as before.
        std::string damaged = old;
        damaged[damaged.size() - 5] ^= 0x10;
        write_file(path, damaged);
        expect_parse_error_loading(path, "checksum mismatch");
        std::filesystem::remove(path);
    }
}
