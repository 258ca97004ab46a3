#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <tuple>

#include "test_helpers.hpp"

using namespace kiln;

namespace {

// relu(x + c) * y, with a float literal c.
program small_program() {
    program p;
    module* m = p.get_main_module();
    shape s{dtype::float_type, {2, 3}};
    auto x = m->add_parameter("x", s);
    auto y = m->add_parameter("y", s);
    auto c = m->add_literal(literal(shape{dtype::float_type, {3}}, std::vector<float>{1.0f, -2.0f, 0.5f}));
    auto sum = m->add_instruction(make_op("add"), {x, c});
    auto r = m->add_instruction(make_op("relu"), {sum});
    auto prod = m->add_instruction(make_op("mul"), {r, y});
    auto conv = m->add_instruction(make_op("convert", value_map{{"target_type", value("half")}}), {prod});
    m->add_return({prod, conv});
    return p;
}

parameter_map small_inputs() {
    shape s{dtype::float_type, {2, 3}};
    return {{"x", generate_argument(s, 1)}, {"y", generate_argument(s, 2)}};
}

std::filesystem::path temp_path(const std::string& name) {
    return std::filesystem::temp_directory_path() / ("kiln_test_serialize_" + std::to_string(::getpid()) + "_" + name);
}

void write_file(const std::filesystem::path& path, const std::string& bytes) {
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Expects load_buffer to fail with a parse error whose message names the
// buffer and contains `needle`.
void expect_parse_error(const std::string& bytes, const std::string& needle = "") {
    try {
        load_buffer(bytes.data(), bytes.size());
        FAIL() << "expected a parse error" << (needle.empty() ? "" : " mentioning '" + needle + "'");
    } catch (const error& e) {
        EXPECT_EQ(e.kind(), error_kind::parse_error) << e.what();
        std::string msg = e.what();
        EXPECT_EQ(msg.rfind("buffer: ", 0), 0u) << msg;
        EXPECT_NE(msg.find(needle), std::string::npos) << msg;
    }
}

void expect_same_outputs(const std::vector<argument>& a, const std::vector<argument>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].get_shape(), b[i].get_shape());
        EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].get_shape().bytes()), 0) << "output " << i;
    }
}

// Rewrites the metadata JSON of a saved image and fixes the header so that
// only the semantic checks can catch the change.
std::string with_metadata(const std::string& image, const std::string& from, const std::string& to) {
    // The metadata is the JSON text between the 64-byte header and the data section.
    std::uint64_t meta_size = 0;
    std::memcpy(&meta_size, image.data() + 24, 8);
    std::string meta = image.substr(64, meta_size);
    auto pos = meta.find(from);
    EXPECT_NE(pos, std::string::npos) << "test setup: '" << from << "' not in " << meta;
    if (pos == std::string::npos) return image;
    meta.replace(pos, from.size(), to);
    // Re-save through a program would undo the change, so rebuild the file by hand.
    std::uint64_t data_offset = 0, data_size = 0;
    std::memcpy(&data_offset, image.data() + 32, 8);
    std::memcpy(&data_size, image.data() + 40, 8);
    std::uint64_t new_data_offset = (64 + meta.size() + 63) / 64 * 64;
    std::string out(new_data_offset + data_size, '\0');
    std::memcpy(out.data(), image.data(), 64);
    std::memcpy(out.data() + 64, meta.data(), meta.size());
    std::memcpy(out.data() + new_data_offset, image.data() + data_offset, data_size);
    std::uint64_t fields[] = {meta.size(), new_data_offset, data_size, out.size()};
    std::memcpy(out.data() + 24, &fields[0], 8);
    std::memcpy(out.data() + 32, &fields[1], 8);
    std::memcpy(out.data() + 40, &fields[2], 8);
    std::memcpy(out.data() + 48, &fields[3], 8);
    auto crc = [](const std::string& s, std::size_t from_byte, std::size_t n) {
        std::uint32_t c =
            ::crc32(0, reinterpret_cast<const unsigned char*>(s.data()) + from_byte, static_cast<unsigned>(n));
        return c;
    };
    // From format 2 on the body checksum covers the metadata (the data has its own, in the metadata).
    std::uint32_t body = crc(out, 64, new_data_offset - 64);
    std::memcpy(out.data() + 56, &body, 4);
    std::uint32_t head = crc(out, 0, 60);
    std::memcpy(out.data() + 60, &head, 4);
    return out;
}

}  // namespace

TEST(serialize, literal_of_every_dtype_round_trips_bit_identical) {
    for (dtype t : all_dtypes) {
        program p;
        module* m = p.get_main_module();
        shape s{t, {3, 5}};
        argument a = generate_argument(s, 7);
        auto lit = m->add_literal(literal(a));
        auto x = m->add_parameter("x", s);
        m->add_return({lit, x});
        program q = load_buffer(save_buffer(p).data(), save_buffer(p).size());
        const module* qm = q.get_main_module();
        ASSERT_EQ(qm->size(), 3u) << to_string(t);
        const argument& b = qm->begin()->get_literal().get_argument();
        ASSERT_EQ(b.get_shape(), s) << to_string(t);
        EXPECT_EQ(std::memcmp(a.data(), b.data(), s.bytes()), 0) << to_string(t);
        EXPECT_EQ(q.get_parameter_shapes(), p.get_parameter_shapes()) << to_string(t);
        EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b.data()) % 64, 0u);
    }
}

TEST(serialize, special_float_values_and_scalars_round_trip) {
    program p;
    module* m = p.get_main_module();
    std::vector<double> v = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                             -std::numeric_limits<double>::infinity(), -0.0, 1e-310};
    auto a = m->add_literal(literal(shape{dtype::double_type, {5}}, v));
    auto b = m->add_literal(literal(shape{dtype::int64_type}, std::vector<std::int64_t>{-42}));
    auto e = m->add_literal(literal(shape{dtype::float_type, {0, 4}}, std::vector<float>{}));
    m->add_return({a, b, e});
    std::string bytes = save_buffer(p);
    program q = load_buffer(bytes.data(), bytes.size());
    auto it = q.get_main_module()->begin();
    EXPECT_EQ(std::memcmp(it->get_literal().get_argument().data(), m->begin()->get_literal().get_argument().data(), 40),
              0);
    ++it;
    EXPECT_EQ(it->get_literal().to_vector<std::int64_t>(), std::vector<std::int64_t>{-42});
    ++it;
    EXPECT_EQ(it->get_shape().elements(), 0u);
    EXPECT_EQ(save_buffer(q), bytes);
}

TEST(serialize, uncompiled_program_round_trips_and_runs_the_same) {
    program p = small_program();
    std::string bytes = save_buffer(p);
    program q = load_buffer(bytes.data(), bytes.size());
    EXPECT_FALSE(q.is_compiled());
    EXPECT_EQ(to_string(q), to_string(p));
    EXPECT_EQ(save_buffer(q), bytes);
    for (const auto* t : {"ref", "cpu"})
        expect_same_outputs(test::run_on(q, t, small_inputs()), test::run_on(p, t, small_inputs()));
}

TEST(serialize, compiled_program_reloads_without_recompiling) {
    for (const auto* t : {"ref", "cpu"}) {
        program p = small_program();
        compile_options options;
        options.threads = 1;
        options.disabled_passes = {"some_pass"};
        p.compile(get_target(t), options);
        auto path = temp_path(std::string("compiled_") + t + ".kiln");
        save(p, path.string());
        program q = load(path.string());
        ASSERT_TRUE(q.is_compiled()) << t;
        EXPECT_EQ(q.target_name(), t);
        EXPECT_EQ(q.get_compile_options().threads, 1);
        EXPECT_EQ(q.get_compile_options().disabled_passes, std::vector<std::string>{"some_pass"});
        EXPECT_EQ(to_string(q), to_string(p)) << t;
        expect_same_outputs(q.eval(small_inputs()), p.eval(small_inputs()));
        // save / load / save gives the same bytes
        auto again = temp_path(std::string("again_") + t + ".kiln");
        save(q, again.string());
        std::ifstream f1(path, std::ios::binary), f2(again, std::ios::binary);
        std::string b1((std::istreambuf_iterator<char>(f1)), {}), b2((std::istreambuf_iterator<char>(f2)), {});
        EXPECT_EQ(b1, b2) << t;
        EXPECT_EQ(b1, save_buffer(p)) << t;
        std::filesystem::remove(path);
        std::filesystem::remove(again);
    }
}

TEST(serialize, sub_modules_are_referenced_by_name) {
    program p = small_program();
    // Created after main, so the file lists main (which uses them) first.
    module* then_branch = p.create_module("then");
    module* else_branch = p.create_module("else");
    for (module* b : {then_branch, else_branch}) {
        auto z = b->add_parameter("z", shape{dtype::float_type, {2, 3}});
        b->add_return({b->add_instruction(make_op(b == then_branch ? "neg" : "abs"), {z})});
    }
    module* m = p.get_main_module();
    auto x = m->get_parameter("x");
    auto ret = m->get_return();
    auto c = m->insert_literal(ret, literal(shape{dtype::bool_type}, std::vector<int>{0}));
    auto t = m->insert_instruction(ret, make_op("if"), {c, x}, {then_branch, else_branch});
    auto e = m->insert_instruction(ret, make_op("get_tuple_elem", value_map{{"index", 0}}), {t});
    m->replace_instruction(ret, ret->get_operator(), {e, ret->inputs()[1]});
    std::string bytes = save_buffer(p);
    program q = load_buffer(bytes.data(), bytes.size());
    ASSERT_NE(q.get_module("then"), nullptr);
    EXPECT_EQ(to_string(q), to_string(p));
    bool found = false;
    for (const auto& ins : *q.get_main_module())
        if (!ins.module_inputs().empty()) {
            found = true;
            EXPECT_EQ(ins.module_inputs()[0], q.get_module("then"));
            EXPECT_EQ(ins.module_inputs()[1], q.get_module("else"));
            EXPECT_TRUE(ins.get_shape().is_tuple());
        }
    EXPECT_TRUE(found);
    EXPECT_EQ(save_buffer(q), bytes);
}

TEST(serialize, data_section_is_64_byte_aligned) {
    std::string bytes = save_buffer(small_program());
    ASSERT_GE(bytes.size(), 64u);
    EXPECT_EQ(std::memcmp(bytes.data(), "\x89KILN\r\n\x1a", 8), 0);
    std::uint64_t data_offset = 0;
    std::memcpy(&data_offset, bytes.data() + 32, 8);
    EXPECT_EQ(data_offset % 64, 0u);
    // The literal {1, -2, 0.5} is the first thing in the data section.
    float first[3];
    std::memcpy(first, bytes.data() + data_offset, sizeof(first));
    EXPECT_EQ(first[1], -2.0f);
}

TEST(serialize, missing_file_is_file_not_found) {
    try {
        load("/nonexistent/dir/model.kiln");
        FAIL();
    } catch (const error& e) {
        EXPECT_EQ(e.kind(), error_kind::file_not_found);
        EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/model.kiln"), std::string::npos);
    }
}

TEST(serialize, empty_and_foreign_files_are_rejected_naming_the_path) {
    // The literal holds 29 bytes; sizeof counts its terminating NUL too.
    static constexpr char png_bytes[] = "\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0";
    const std::string png(png_bytes, sizeof png_bytes - 1);
    // An ONNX file is a protobuf: field 1 (ir_version) varint, then producer_name.
    const std::string onnx("\x08\x07\x12\x07pytorch\x1a\x03\x32\x2e\x30", 15);
    for (const auto& [name, bytes, needle] :
         {std::tuple{"empty.kiln", std::string(), "empty"}, std::tuple{"image.png", png, "not a Kiln program file"},
          std::tuple{"model.onnx", onnx, "not a Kiln program file"}}) {
        auto path = temp_path(name);
        write_file(path, bytes);
        try {
            load(path.string());
            FAIL() << name;
        } catch (const error& e) {
            EXPECT_EQ(e.kind(), error_kind::parse_error);
            std::string msg = e.what();
            EXPECT_NE(msg.find(path.string()), std::string::npos) << msg;
            EXPECT_NE(msg.find(needle), std::string::npos) << msg;
        }
        std::filesystem::remove(path);
    }
    EXPECT_THROW(load(std::filesystem::temp_directory_path().string()), error);
}

TEST(serialize, every_truncation_is_rejected) {
    std::string bytes = save_buffer(small_program());
    for (std::size_t n = 0; n < bytes.size(); ++n) expect_parse_error(bytes.substr(0, n));
    expect_parse_error(bytes.substr(0, 40), "truncated");
    expect_parse_error(bytes.substr(0, bytes.size() - 1), "truncated");
    expect_parse_error(bytes + "x", "unexpected bytes");
}

TEST(serialize, every_flipped_byte_is_rejected) {
    std::string bytes = save_buffer(small_program());
    for (std::size_t i = 0; i < bytes.size(); ++i) {
        std::string bad = bytes;
        bad[i] = static_cast<char>(bad[i] ^ 0x20);
        expect_parse_error(bad);
    }
    std::string body = bytes;
    body[bytes.size() - 2] ^= 1;
    expect_parse_error(body, "checksum");
}

namespace {
// The header's format version, its checksum fixed so only the version check can object.
std::string with_format_version(std::string image, std::uint32_t version) {
    std::memcpy(image.data() + 8, &version, 4);
    std::uint32_t head = ::crc32(0, reinterpret_cast<const unsigned char*>(image.data()), 60);
    std::memcpy(image.data() + 60, &head, 4);
    return image;
}
}  // namespace

TEST(serialize, newer_format_version_is_reported) {
    std::string bytes = save_buffer(small_program());
    bytes[8] = 99;
    expect_parse_error(bytes, "version 99");
}

TEST(serialize, newer_format_names_both_versions_and_both_producers) {
    const std::string here = std::string("kiln ") + version;
    std::string bytes = with_format_version(save_buffer(small_program()), kiln_format_version + 1);
    const std::string newer = std::to_string(kiln_format_version + 1);
    expect_parse_error(bytes, "written in .kiln format version " + newer + " by " + here + "; this build (" + here +
                                  ") reads format versions " + std::to_string(oldest_format_version) + " to " +
                                  std::to_string(kiln_format_version) + ": upgrade Kiln");
    // A future Kiln's file: its metadata cannot be trusted, but its leading producer member names the writer.
    std::string future = with_format_version(
        with_metadata(save_buffer(small_program()), "\"producer\":\"" + here, "\"producer\":\"kiln 7.2.0"), 9);
    expect_parse_error(future, "format version 9 by kiln 7.2.0;");
    // Whatever follows the version may be a layout this build does not know: no producer, still a clear error.
    std::string unknown = with_format_version(save_buffer(small_program()), 9);
    unknown[64] = 'x';
    expect_parse_error(unknown, "format version 9 by an unknown Kiln version;");
    unknown = with_format_version(with_metadata(save_buffer(small_program()), "\"producer\":\"" + here,
                                                "\"producer\":\"kiln \x07"), 9);
    expect_parse_error(unknown, "by an unknown Kiln version;");
    expect_parse_error(with_format_version(save_buffer(small_program()), 0), "invalid format version 0");
}

TEST(serialize, a_newer_producer_of_a_readable_format_loads_with_a_warning) {
    const std::string here = std::string("\"producer\":\"kiln ") + version;
    std::string bytes = with_metadata(save_buffer(small_program()), here, "\"producer\":\"kiln 99.0.0");
    testing::internal::CaptureStderr();
    program p = load_buffer(bytes.data(), bytes.size());
    std::string warning = testing::internal::GetCapturedStderr();
    EXPECT_NE(warning.find("written by kiln 99.0.0, newer than this kiln " + std::string(version)), std::string::npos)
        << warning;
    program original = small_program();
    p.compile(get_target("ref"));
    original.compile(get_target("ref"));
    expect_same_outputs(p.eval(small_inputs()), original.eval(small_inputs()));
    // An older producer is silent.
    bytes = with_metadata(save_buffer(small_program()), here, "\"producer\":\"kiln 0.0.1");
    testing::internal::CaptureStderr();
    load_buffer(bytes.data(), bytes.size());
    EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
    // A producer that is not "kiln <version>" is a malformed file.
    expect_parse_error(with_metadata(save_buffer(small_program()), here, "\"producer\":\"onnx 1.0.0"),
                       "'producer' is onnx 1.0.0, not \"kiln <major>.<minor>.<patch>\"");
    expect_parse_error(with_metadata(save_buffer(small_program()), here + "\"", "\"producer\":3"), "'producer' is 3");
}

TEST(serialize, semantic_errors_name_what_is_wrong) {
    std::string bytes = save_buffer(small_program());
    auto image = [&](const std::string& from, const std::string& to) { return with_metadata(bytes, from, to); };
    // Sanity: the rewriting helper alone produces a loadable file.
    std::string same = image("\"relu\"", "\"relu\"");
    EXPECT_NO_THROW(load_buffer(same.data(), same.size()));

    expect_parse_error(image("\"relu\"", "\"frobnicate\""), "unknown op 'frobnicate'");
    expect_parse_error(image("\"target_type\":\"half_type\"", "\"target_type\":\"quarter\""), "target_type");
    expect_parse_error(image("\"target_type\":\"half_type\"", "\"flavour\":1"), "no attribute 'flavour'");
    expect_parse_error(image("\"inputs\":[3]", "\"inputs\":[9]"), "earlier instruction");
    expect_parse_error(image("\"inputs\":[3]", "\"inputs\":[-1]"), "non-negative");
    expect_parse_error(image("\"bytes\":12", "\"bytes\":8"), "needs 12");
    expect_parse_error(image("\"offset\":0", "\"offset\":640"), "outside the data section");
    expect_parse_error(image("\"offset\":0", "\"offset\":3"), "aligned");
    expect_parse_error(image("{\"producer\"", "[{\"producer\""), "not valid JSON");
    expect_parse_error(image("\"lens\":[3],\"strides\":[1]", "\"lens\":[4611686018427387904,4],\"strides\":[4,1]"),
                       "too large");
    expect_parse_error(image("\"name\":\"y\"", "\"name\":\"x\""), "already has a parameter");
    expect_parse_error(image("\"modules\":[", "\"modules\":[{\"name\":\"main\",\"instructions\":[]},"), "twice");
    // A recorded result shape that compute_shape disagrees with.
    expect_parse_error(image("\"type\":\"half_type\",\"lens\":[2,3]", "\"type\":\"half_type\",\"lens\":[3,2]"),
                       "differs");
    // No return: the verifier rejects the module.
    expect_parse_error(image(",{\"op\":\"@return\",\"inputs\":[5,6]}", ""), "returns");
}

TEST(serialize, metadata_nested_too_deep_is_refused_while_parsing) {
    std::string bytes = save_buffer(small_program());
    // 100,000 levels overflowed the stack inside the parser before the depth
    // was checked; 65 is just past the documented limit of 64.
    for (std::size_t levels : {std::size_t{65}, std::size_t{100000}}) {
        const std::string deep = std::string(levels, '[') + std::string(levels, ']');
        expect_parse_error(with_metadata(bytes, "{\"producer\"", "{\"deep\":" + deep + ",\"producer\""),
                           "more than 64 levels deep");
    }
    // 60 levels parse; the reader then rejects the unknown member.
    const std::string fine = std::string(60, '[') + std::string(60, ']');
    try {
        const std::string image = with_metadata(bytes, "{\"producer\"", "{\"deep\":" + fine + ",\"producer\"");
        load_buffer(image.data(), image.size());
    } catch (const error& e) {
        EXPECT_EQ(std::string(e.what()).find("levels deep"), std::string::npos) << e.what();
    }
}
