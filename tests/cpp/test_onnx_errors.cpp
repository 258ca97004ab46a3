// ONNX importer: bad input raises a kiln::error naming the problem and the
// node or file, never crashes or allocates without bound.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "onnx/model_bytes.hpp"
#include "onnx/onnx_parser.hpp"
#include "onnx_model_builder.hpp"

using namespace kiln;
using test::onnx_model_builder;
using test::set_attr;

namespace {

constexpr auto float_type = onnx::TensorProto::FLOAT;

// The error raised by `f`, failing the test when none is.
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

void expect_mentions(const error& e, const std::vector<std::string>& words) {
    for (const auto& w : words) EXPECT_NE(std::string(e.what()).find(w), std::string::npos) << e.what();
}

onnx_model_builder relu_model() {
    onnx_model_builder b;
    b.input("x", float_type, {2, 3}).output("y");
    b.node("Relu", {"x"}, {"y"}, "act");
    return b;
}

// A scratch folder for model files, removed afterwards.
class onnx_files : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() /
               ("kiln_onnx_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
                ::testing::UnitTest::GetInstance()->current_test_info()->name());
        std::filesystem::create_directories(dir_ / "model");
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::string write(const std::string& rel, const std::string& bytes) {
        auto path = dir_ / rel;
        std::ofstream(path, std::ios::binary) << bytes;
        return path.string();
    }
    std::filesystem::path dir_;
};

}  // namespace

TEST_F(onnx_files, reads_a_model_file) {
    auto path = write("model/relu.onnx", relu_model().bytes());
    program p = parse_onnx(path);
    EXPECT_EQ(p.get_parameter_names(), std::vector<std::string>{"x"});
}

TEST_F(onnx_files, large_initializers_in_the_file_and_beside_it_are_read_exactly) {
    // Several MiB each, beyond the sizes that take small-buffer paths.
    const std::size_t n = std::size_t{3} << 20;
    std::vector<float> inside(n), beside(n);
    for (std::size_t i = 0; i < n; ++i) {
        inside[i] = static_cast<float>(i % 1000) * 0.5f - 7.0f;
        beside[i] = static_cast<float>(i % 777) * -0.25f;
    }
    write("model/beside.bin", test::raw_bytes<float>(beside));
    onnx_model_builder b;
    b.output("a").output("b");
    b.initializer("a", float_type, {static_cast<std::int64_t>(n)}).set_raw_data(test::raw_bytes<float>(inside));
    auto& w = b.initializer("b", float_type, {static_cast<std::int64_t>(n)});
    w.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* entry = w.add_external_data();
    entry->set_key("location");
    entry->set_value("beside.bin");
    program p = parse_onnx(write("model/big.onnx", b.bytes()));
    auto ret = p.get_main_module()->get_return();
    ASSERT_EQ(ret->inputs().size(), 2u);
    ASSERT_TRUE(ret->inputs()[0]->is_literal() && ret->inputs()[1]->is_literal()) << p;
    EXPECT_EQ(ret->inputs()[0]->get_literal().to_vector<float>(), inside);
    EXPECT_EQ(ret->inputs()[1]->get_literal().to_vector<float>(), beside);
}

TEST_F(onnx_files, missing_file_is_file_not_found) {
    auto e = error_from([&] { parse_onnx((dir_ / "nope.onnx").string()); });
    EXPECT_EQ(e.kind(), error_kind::file_not_found);
    expect_mentions(e, {"nope.onnx"});
}

TEST_F(onnx_files, a_path_that_is_not_a_regular_file_says_so) {
    std::filesystem::create_directories(dir_ / "a_directory.onnx");
    const auto fifo = dir_ / "a_fifo.onnx";
    ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
    for (const auto& [path, kind] : {std::pair{(dir_ / "a_directory.onnx").string(), "a directory"},
                                     std::pair{fifo.string(), "a FIFO, socket or device"},
                                     std::pair{std::string("/dev/zero"), "a FIFO, socket or device"}}) {
        auto e = error_from([&] { parse_onnx(path); });
        EXPECT_EQ(e.kind(), error_kind::invalid_argument) << e.what();
        expect_mentions(e, {path, "not a regular file", kind});
    }
}

// Another process may cut a model file short while it is parsed. Reading a
// mapping past the new end would be SIGBUS; the file is read, never mapped,
// so a read comes back short and the import fails with a Kiln error.
TEST_F(onnx_files, copying_out_of_a_file_cut_short_is_an_error_not_sigbus) {
    std::string bytes(1 << 20, '\0');
    for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i * 7);
    const auto path = write("model/shrinking.bin", bytes);
    onnx_import::file_model_bytes file(path);
    std::filesystem::resize_file(path, 4096);
    std::string out(8192, '\0');
    file.copy({0, 4096}, out.data());
    EXPECT_EQ(out.substr(0, 4096), bytes.substr(0, 4096));
    auto e = error_from([&] { file.copy({512 << 10, 8192}, out.data()); });
    EXPECT_EQ(e.kind(), error_kind::parse_error);
    expect_mentions(e, {"shrinking.bin", "changed while it was read"});
}

TEST_F(onnx_files, a_model_file_cut_short_after_it_was_opened_is_an_error_not_sigbus) {
    onnx_model_builder b;
    b.input("x", float_type, {1 << 16}).output("y");
    b.initializer("w", float_type, {1 << 16}).set_raw_data(test::raw_bytes<float>(std::vector<float>(1 << 16, 0.5f)));
    b.node("Mul", {"x", "w"}, {"y"}, "scale");
    const std::string model = b.bytes();
    // Cut in the weights, in the structure after them, and at the very start.
    for (std::size_t keep : {model.size() / 2, model.size() - 8, std::size_t{16}}) {
        SCOPED_TRACE(keep);
        const auto path = write("model/cut_short.onnx", model);
        onnx_import::file_model_bytes file(path);
        std::filesystem::resize_file(path, keep);
        auto e = error_from(
            [&] { onnx_import::parse_model(file, {}, dir_, path, [](const onnx_options&, auto) { return nullptr; }); });
        EXPECT_EQ(e.kind(), error_kind::parse_error);
        expect_mentions(e, {"cut_short.onnx", "changed while it was read"});
    }
}

TEST_F(onnx_files, empty_file_is_a_parse_error) {
    auto path = write("model/empty.onnx", "");
    auto e = error_from([&] { parse_onnx(path); });
    EXPECT_EQ(e.kind(), error_kind::parse_error);
    expect_mentions(e, {"empty.onnx", "empty"});
}

TEST(onnx_errors, malformed_and_truncated_protobufs) {
    std::string garbage = "\xff\xff\xff\xff this is not a protobuf";
    auto e = error_from([&] { parse_onnx_buffer(garbage.data(), garbage.size()); });
    EXPECT_EQ(e.kind(), error_kind::parse_error);
    expect_mentions(e, {"malformed or truncated"});
    // Every prefix of a valid model either parses or fails cleanly.
    std::string bytes = relu_model().bytes();
    for (std::size_t n = 0; n < bytes.size(); ++n) {
        try {
            parse_onnx_buffer(bytes.data(), n);
        } catch (const error&) {
        }
    }
}

TEST(onnx_errors, every_unsupported_op_is_listed_with_its_nodes) {
    onnx_model_builder b;
    b.input("x", float_type, {2}).output("y");
    b.node("Frobnicate", {"x"}, {"a"}, "first");
    b.node("Relu", {"a"}, {"b"});
    b.node("Frobnicate", {"b"}, {"c"}, "second");
    auto& custom = b.node("Blend", {"c"}, {"y"}, "third");
    custom.set_domain("com.example");
    auto e = error_from([&] { b.parse(); });
    EXPECT_EQ(e.kind(), error_kind::not_implemented);
    expect_mentions(e, {"2 unsupported", "Frobnicate 'first'", "Frobnicate 'second'", "com.example::Blend 'third'"});
}

TEST(onnx_errors, wrong_attribute_type_names_the_node_and_attribute) {
    onnx_model_builder b;
    b.input("x", float_type, {2, 3}).output("y");
    auto& n = b.node("Flatten", {"x"}, {"y"}, "flat");
    set_attr(n, "axis", 1.0f);
    auto e = error_from([&] { b.parse(); });
    EXPECT_EQ(e.kind(), error_kind::type_error);
    expect_mentions(e, {"Flatten 'flat'", "'axis'", "INT", "FLOAT"});
}

TEST(onnx_errors, inconsistent_shapes_name_the_node) {
    onnx_model_builder b;
    b.input("x", float_type, {2, 3}).input("z", float_type, {4}).output("y");
    b.node("Add", {"x", "z"}, {"y"}, "bad_add");
    auto e = error_from([&] { b.parse(); });
    expect_mentions(e, {"Add 'bad_add'", "add"});
}

TEST(onnx_errors, huge_declared_dims_are_refused_before_allocating) {
    onnx_model_builder input_model;
    input_model.input("x", float_type, {1 << 20, 1 << 20, 1 << 20}).output("y");
    input_model.node("Relu", {"x"}, {"y"});
    auto e = error_from([&] { input_model.parse(); });
    expect_mentions(e, {"'x'", "more memory"});

    // An initializer declaring a huge shape with almost no data.
    onnx_model_builder init_model;
    init_model.output("y");
    init_model.float_initializer("w", {1 << 30, 1 << 30}, {1.0f});
    init_model.node("Identity", {"w"}, {"y"});
    e = error_from([&] { init_model.parse(); });
    expect_mentions(e, {"'w'"});

    // Overflowing element counts.
    onnx_model_builder overflow;
    overflow.input("x", float_type, {std::int64_t{1} << 40, std::int64_t{1} << 40}).output("y");
    overflow.node("Relu", {"x"}, {"y"});
    e = error_from([&] { overflow.parse(); });
    expect_mentions(e, {"more memory"});
}

TEST(onnx_errors, raw_data_of_the_wrong_size) {
    onnx_model_builder b;
    b.output("y");
    b.initializer("w", float_type, {4}).set_raw_data(std::string(6, '\0'));
    b.node("Identity", {"w"}, {"y"});
    auto e = error_from([&] { b.parse(); });
    EXPECT_EQ(e.kind(), error_kind::parse_error);
    expect_mentions(e, {"'w'", "raw_data holds 6 bytes"});
}

TEST(onnx_errors, undefined_input_and_missing_output) {
    onnx_model_builder b;
    b.input("x", float_type, {2}).output("y");
    b.node("Relu", {"ghost"}, {"y"}, "r");
    expect_mentions(error_from([&] { b.parse(); }), {"Relu 'r'", "'ghost'"});

    onnx_model_builder c;
    c.input("x", float_type, {2}).output("never");
    c.node("Relu", {"x"}, {"y"});
    expect_mentions(error_from([&] { c.parse(); }), {"'never'"});
}

TEST(onnx_errors, unsupported_dtype_and_unknown_map_input_dims) {
    onnx_model_builder b;
    b.input("x", onnx::TensorProto::COMPLEX64, {2}).output("y");
    b.node("Identity", {"x"}, {"y"});
    auto e = error_from([&] { b.parse(); });
    EXPECT_EQ(e.kind(), error_kind::not_implemented);
    expect_mentions(e, {"COMPLEX64"});

    onnx_options o;
    o.map_input_dims["typo"] = {1};
    expect_mentions(error_from([&] { relu_model().parse(o); }), {"'typo'"});
}

TEST_F(onnx_files, external_data_is_read_relative_to_the_model) {
    write("model/weights.bin", std::string(8, '\0') + test::raw_bytes<float>({1.5f, -2.0f}));
    onnx_model_builder b;
    b.input("x", float_type, {2}).output("y");
    auto& w = b.initializer("w", float_type, {2});
    w.set_data_location(onnx::TensorProto::EXTERNAL);
    auto add_entry = [&](const std::string& k, const std::string& v) {
        auto* entry = w.add_external_data();
        entry->set_key(k);
        entry->set_value(v);
    };
    add_entry("location", "weights.bin");
    add_entry("offset", "8");
    add_entry("length", "8");
    b.node("Mul", {"x", "w"}, {"y"});
    program p = parse_onnx(write("model/ext.onnx", b.bytes()));
    auto prog = p;
    prog.compile(get_target("ref"));
    auto out = prog.eval({{"x", literal(shape{dtype::float_type, {2}}, std::vector<float>{2, 3}).get_argument()}});
    EXPECT_EQ(out.at(0).to_vector<float>(), (std::vector<float>{3, -6}));
}

TEST_F(onnx_files, external_data_outside_the_model_folder_is_refused) {
    write("secret.bin", test::raw_bytes<float>({1, 2}));
    for (std::string location : {"../secret.bin", "../../etc/passwd", "/etc/passwd", "sub/../../secret.bin"}) {
        SCOPED_TRACE(location);
        onnx_model_builder b;
        b.output("y");
        auto& w = b.initializer("w", float_type, {2});
        w.set_data_location(onnx::TensorProto::EXTERNAL);
        auto* entry = w.add_external_data();
        entry->set_key("location");
        entry->set_value(location);
        b.node("Identity", {"w"}, {"y"});
        auto path = write("model/escape.onnx", b.bytes());
        auto e = error_from([&] { parse_onnx(path); });
        expect_mentions(e, {"'w'", "outside the model's folder", location});
    }
}

TEST_F(onnx_files, external_data_file_too_short) {
    write("model/short.bin", std::string(4, '\0'));
    onnx_model_builder b;
    b.output("y");
    auto& w = b.initializer("w", float_type, {2});
    w.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* entry = w.add_external_data();
    entry->set_key("location");
    entry->set_value("short.bin");
    b.node("Identity", {"w"}, {"y"});
    auto e = error_from([&] { parse_onnx(write("model/m.onnx", b.bytes())); });
    expect_mentions(e, {"short.bin", "too few"});
}

// A tensor that declares 2^30 floats (4 GiB, under this machine's limit) but
// holds none is refused before its memory is allocated: the fuzzer's input
// that took 4 GiB to refuse (tests/data/onnx_fuzz_regressions/).
TEST_F(onnx_files, a_huge_tensor_without_its_data_is_refused_before_allocating) {
    const std::int64_t huge = std::int64_t{1} << 30;
    write("model/short.bin", std::string(4, '\0'));
    onnx_model_builder typed;
    typed.output("y");
    typed.initializer("w", float_type, {huge});  // no float_data at all
    typed.node("Identity", {"w"}, {"y"});
    onnx_model_builder external;
    external.output("y");
    auto& w = external.initializer("w", float_type, {huge});
    w.set_data_location(onnx::TensorProto::EXTERNAL);
    auto* entry = w.add_external_data();
    entry->set_key("location");
    entry->set_value("short.bin");
    external.node("Identity", {"w"}, {"y"});
    for (const auto& [b, words] : {std::pair{typed, std::vector<std::string>{"float_data holds 0 values"}},
                                   std::pair{external, std::vector<std::string>{"short.bin", "too few"}}}) {
        struct rusage before {};
        ::getrusage(RUSAGE_SELF, &before);
        auto e = error_from([&] { parse_onnx(write("model/huge.onnx", b.bytes())); });
        expect_mentions(e, words);
        struct rusage after {};
        ::getrusage(RUSAGE_SELF, &after);
        EXPECT_LT(after.ru_maxrss - before.ru_maxrss, 512 * 1024) << "peak resident memory grew by "
                                                                   << (after.ru_maxrss - before.ru_maxrss) << " KiB";
    }
}
