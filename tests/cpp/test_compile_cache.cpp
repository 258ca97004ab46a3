// compile(cache_dir=...): each part of the key changed gives a miss, a hit
// compiles nothing and runs identically, a damaged entry is rebuilt.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "kiln/kiln.hpp"

using namespace kiln;
namespace fs = std::filesystem;

namespace {

// relu(x . w + b): the cpu target packs w (kept by its kernel), b stays a literal.
program dense_program(std::size_t rows = 4, dtype type = dtype::float_type, float weight_scale = 0.25f) {
    program p;
    module* m = p.get_main_module();
    auto x = m->add_parameter("x", shape{type, {rows, 64}});
    auto w = m->add_literal(literal(shape{type, {64, 32}}, [&](std::byte* out) {
        for (std::size_t i = 0; i < 64 * 32; ++i) {
            const float v = static_cast<float>(static_cast<int>(i % 17) - 8) * weight_scale;
            if (type == dtype::float_type)
                reinterpret_cast<float*>(out)[i] = v;
            else
                reinterpret_cast<double*>(out)[i] = v;
        }
    }));
    auto b = m->add_literal(literal(shape{type, {rows, 32}}, [&](std::byte* out) {
        std::memset(out, 0, rows * 32 * (type == dtype::float_type ? 4 : 8));
    }));
    auto d = m->add_instruction(make_op("dot"), {x, w});
    m->add_return({m->add_instruction(make_op("relu"), {m->add_instruction(make_op("add"), {d, b})})});
    return p;
}

parameter_map dense_inputs(std::size_t rows = 4) {
    return {{"x", generate_argument(shape{dtype::float_type, {rows, 64}}, 7)}};
}

struct cache_dir {
    fs::path path = fs::temp_directory_path() / ("kiln_test_compile_cache_" + std::to_string(::getpid()));
    cache_dir() { fs::remove_all(path); }
    ~cache_dir() { fs::remove_all(path); }
    std::vector<fs::path> entries() const {
        std::vector<fs::path> out;
        if (fs::exists(path))
            for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path());
        return out;
    }
};

compile_options with_cache(const cache_dir& dir) {
    compile_options o;
    o.cache_dir = dir.path.string();
    return o;
}

void expect_identical(const std::vector<argument>& a, const std::vector<argument>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
        ASSERT_EQ(a[i].get_shape(), b[i].get_shape());
        EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].get_shape().bytes()), 0) << "output " << i;
    }
}

}  // namespace

TEST(compile_cache, a_second_compile_loads_the_entry_and_runs_identically) {
    cache_dir dir;
    program first = dense_program();
    first.compile(get_target("cpu"), with_cache(dir));
    EXPECT_FALSE(first.compiled_from_cache());
    ASSERT_EQ(dir.entries().size(), 1u);
    EXPECT_EQ(dir.entries()[0].extension(), ".kiln");

    program second = dense_program();
    const module* main = second.get_main_module();
    second.compile(get_target("cpu"), with_cache(dir));
    EXPECT_TRUE(second.compiled_from_cache());
    EXPECT_EQ(second.get_main_module(), main);  // the module objects callers hold stay valid
    EXPECT_EQ(second.target_name(), "cpu");
    expect_identical(second.eval(dense_inputs()), first.eval(dense_inputs()));
    EXPECT_EQ(dir.entries().size(), 1u);
}

TEST(compile_cache, each_part_of_the_key_changed_is_a_miss) {
    const program base = dense_program();
    const target& cpu = get_target("cpu");
    const compile_options plain;
    const compile_cache_context here = current_compile_cache_context();
    const std::string key = compile_cache_key(base, cpu, plain, here);
    EXPECT_EQ(compile_cache_key(dense_program(), cpu, plain, here), key);  // deterministic

    std::vector<std::pair<std::string, std::string>> changed;
    changed.emplace_back("weights", compile_cache_key(dense_program(4, dtype::float_type, 0.5f), cpu, plain, here));
    changed.emplace_back("input shape", compile_cache_key(dense_program(8), cpu, plain, here));
    changed.emplace_back("dtype", compile_cache_key(dense_program(4, dtype::double_type), cpu, plain, here));
    changed.emplace_back("target", compile_cache_key(base, get_target("ref"), plain, here));
    compile_options threads;
    threads.threads = 1;
    changed.emplace_back("threads", compile_cache_key(base, cpu, threads, here));
    compile_options disabled;
    disabled.disabled_passes = {"fuse_pointwise"};
    changed.emplace_back("disabled passes", compile_cache_key(base, cpu, disabled, here));
    compile_options tuned;
    tuned.exhaustive_tune = true;
    changed.emplace_back("exhaustive_tune", compile_cache_key(base, cpu, tuned, here));
    compile_options offload;
    offload.offload_copy = false;
    changed.emplace_back("offload_copy", compile_cache_key(base, cpu, offload, here));
    compile_cache_context other = here;
    other.kiln_version = "0.0.0-other";
    changed.emplace_back("Kiln version", compile_cache_key(base, cpu, plain, other));
    other = here;
    other.cpu = "another CPU | sse2";
    changed.emplace_back("CPU features", compile_cache_key(base, cpu, plain, other));
    other = here;
    other.disabled_passes_variable = "fuse_pointwise";
    changed.emplace_back("KILN_DISABLE_PASSES", compile_cache_key(base, cpu, plain, other));
    other = here;
    other.cpu_isa_variable = here.cpu_isa_variable == "avx2" ? "avx512" : "avx2";
    changed.emplace_back("KILN_CPU_ISA", compile_cache_key(base, cpu, plain, other));
    for (const auto& [what, k] : changed) EXPECT_NE(k, key) << what << " changed but the key did not";

    // Options that do not change the result share the entry.
    compile_options traced;
    traced.trace_passes = true;
    traced.verify_passes = true;
    EXPECT_EQ(compile_cache_key(base, cpu, traced, here), key);
}

TEST(compile_cache, a_changed_program_misses_and_gets_its_own_entry) {
    cache_dir dir;
    dense_program().compile(get_target("cpu"), with_cache(dir));
    program other = dense_program(4, dtype::float_type, 0.5f);
    other.compile(get_target("cpu"), with_cache(dir));
    EXPECT_FALSE(other.compiled_from_cache());
    EXPECT_EQ(dir.entries().size(), 2u);
    program ref = dense_program();
    ref.compile(get_target("ref"), with_cache(dir));
    EXPECT_FALSE(ref.compiled_from_cache());
    EXPECT_EQ(dir.entries().size(), 3u);
}

TEST(compile_cache, a_damaged_or_truncated_entry_is_rebuilt_never_trusted) {
    cache_dir dir;
    program original = dense_program();
    original.compile(get_target("cpu"), with_cache(dir));
    const fs::path entry = dir.entries().at(0);
    std::string bytes;
    {
        std::ifstream f(entry, std::ios::binary);
        bytes.assign(std::istreambuf_iterator<char>(f), {});
    }
    std::string flipped = bytes;
    flipped[flipped.size() - 3] ^= 0x40;  // a weight byte: only the weights' checksum sees it
    for (const std::string& damaged : {flipped, bytes.substr(0, bytes.size() / 2), std::string("not a kiln file")}) {
        {
            std::ofstream f(entry, std::ios::binary | std::ios::trunc);
            f.write(damaged.data(), static_cast<std::streamsize>(damaged.size()));
        }
        testing::internal::CaptureStderr();
        program p = dense_program();
        p.compile(get_target("cpu"), with_cache(dir));
        const std::string warning = testing::internal::GetCapturedStderr();
        EXPECT_FALSE(p.compiled_from_cache());
        EXPECT_NE(warning.find("compile cache entry is damaged, compiling again"), std::string::npos) << warning;
        expect_identical(p.eval(dense_inputs()), original.eval(dense_inputs()));
        // Rebuilt in place: the next compile hits.
        program again = dense_program();
        again.compile(get_target("cpu"), with_cache(dir));
        EXPECT_TRUE(again.compiled_from_cache());
        expect_identical(again.eval(dense_inputs()), original.eval(dense_inputs()));
        EXPECT_EQ(dir.entries().size(), 1u);  // no temporary file left behind
    }
}

TEST(compile_cache, an_unwritable_directory_is_a_clear_error) {
    cache_dir dir;
    fs::create_directories(dir.path.parent_path());
    {
        std::ofstream f(dir.path);  // a file where the directory should be
    }
    program p = dense_program();
    try {
        p.compile(get_target("cpu"), with_cache(dir));
        FAIL() << "expected an error";
    } catch (const error& e) {
        EXPECT_NE(std::string(e.what()).find("compile cache: cannot create the directory '" + dir.path.string()),
                  std::string::npos)
            << e.what();
    }
    EXPECT_FALSE(p.is_compiled());
    fs::remove(dir.path);
}
