// The compile cache (kiln/compile_cache.hpp), and program::compile, which
// consults it: the cache stands above the IR and compiles a miss with
// program::compile_uncached (src/ir/program.cpp).
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "io/content_hash.hpp"
#include "io/json_codec.hpp"
#include "io/program_fingerprint.hpp"
#include "kiln/compile_cache.hpp"
#include "kiln/serialize.hpp"
#include "kiln/version.hpp"

namespace kiln {

namespace {

std::string hex(std::uint64_t v) {
    static const char digits[] = "0123456789abcdef";
    std::string out(16, '0');
    for (int i = 15; i >= 0; --i, v >>= 4) out[static_cast<std::size_t>(i)] = digits[v & 15];
    return out;
}

// The options that change what compile produces (tracing, verifying and the
// tuning cache's path do not; the tuned choices themselves are measured).
io::json result_options(const compile_options& o) {
    return {{"offload_copy", o.offload_copy},
            {"threads", o.threads},
            {"disabled_passes", o.disabled_passes},
            {"max_memory_bytes", o.max_memory_bytes},
            {"exhaustive_tune", o.exhaustive_tune},
            {"pinned_algorithms", o.pinned_algorithms}};
}

}  // namespace

compile_cache_context current_compile_cache_context() {
    const char* disabled = std::getenv("KILN_DISABLE_PASSES");
    const char* block = std::getenv("KILN_CPU_CHANNEL_BLOCK");
    const char* isa = std::getenv("KILN_CPU_ISA");
    // The machine is the target's to say (target::identity), at the key.
    return {version, "", disabled ? disabled : "", block ? block : "", isa ? isa : ""};
}

std::string compile_cache_key(const program& p, const target& t, const compile_options& options,
                              const compile_cache_context& context) {
    const io::json header{{"kiln", context.kiln_version},
                          {"format", kiln_format_version},
                          {"target", t.name()},
                          {"cpu", context.cpu.empty() ? t.identity() : context.cpu},
                          {"options", result_options(options)},
                          {"KILN_DISABLE_PASSES", context.disabled_passes_variable},
                          {"KILN_CPU_CHANNEL_BLOCK", context.channel_block_variable},
                          {"KILN_CPU_ISA", context.cpu_isa_variable}};
    const std::string material = header.dump() + "\n" + io::program_fingerprint(p);
    io::content_hash key;
    key.add(material.data(), material.size());
    return hex(key.first()) + hex(key.second());
}

void compile_through_cache(program& p, const target& t, const compile_options& options) {
    namespace fs = std::filesystem;
    compile_options plain = options;
    plain.cache_dir.clear();
    const fs::path dir(options.cache_dir);
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) fail(error_kind::runtime, "compile cache: cannot create the directory '" + dir.string() + "': " + ec.message());
    const fs::path entry = dir / (compile_cache_key(p, t, plain) + ".kiln");
    if (fs::exists(entry, ec)) {
        try {
            // Every checksum, the weights' too: a damaged entry is rebuilt, never run.
            program cached = load(entry.string(), load_options{true});
            if (cached.is_compiled() && !cached.is_dynamic() && cached.target_name() == t.name()) {
                p.adopt_cached(std::move(cached));
                return;
            }
            std::cerr << "kiln: warning: compile cache entry " << entry.string()
                      << " is not a compiled program for target '" << t.name() << "'; compiling again\n";
        } catch (const error& e) {
            std::cerr << "kiln: warning: compile cache entry is damaged, compiling again: " << e.what() << '\n';
        }
    }
    p.compile(t, plain);
    // A cache that cannot be written (full disk, read-only) costs only the next compile.
    try {
        save(p, entry.string());
    } catch (const error& e) {
        std::cerr << "kiln: warning: cannot store the compiled program in the compile cache: " << e.what() << '\n';
    }
}

void program::compile(const target& t, const compile_options& options) {
    if (options.cache_dir.empty() || is_dynamic()) {
        compile_uncached(t, options);
        return;
    }
    // Verified on a miss, by compile_uncached; a hit is a program that was
    // verified when it was compiled (the key holds all of it).
    fail_if_compiled();
    compile_through_cache(*this, t, options);
}

}  // namespace kiln
