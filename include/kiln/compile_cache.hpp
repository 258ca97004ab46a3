#pragma once
// The compile cache: compiled programs stored in a directory as .kiln files
// named by a key, so that a process compiling a program compiled before
// (by itself or any other process) loads it instead, its weights mapped.
//
// The key hashes everything that decides the compiled result: the program
// as saved (its modules, parameter shapes and dtypes, and the bytes of its
// literals), the options that change the result, the target, Kiln's version,
// the machine as the target identifies it (target::identity: the CPU's
// model and ISA for cpu), and KILN_DISABLE_PASSES. Entries are written to a
// temporary file and renamed, so a reader never sees half of one; an entry
// that fails any check (truncated, any checksum, weights included) is
// compiled again and replaced, never trusted.
#include <string>

#include "kiln/program.hpp"

namespace kiln {

// What besides the program and its options a compiled result depends on.
struct compile_cache_context {
    std::string kiln_version;
    // The machine: the CPU's model and ISA for cpu. Empty (as this process's
    // context leaves it): the target's own identity() at the key.
    std::string cpu;
    std::string disabled_passes_variable;  // KILN_DISABLE_PASSES
    std::string channel_block_variable;    // KILN_CPU_CHANNEL_BLOCK
    std::string cpu_isa_variable;          // KILN_CPU_ISA
};
// This process's.
compile_cache_context current_compile_cache_context();

// The entry name for compiling `p` for `t` with `options` (hex digits).
std::string compile_cache_key(const program& p, const target& t, const compile_options& options,
                              const compile_cache_context& context = current_compile_cache_context());

// What program::compile does when options.cache_dir is set: load the entry
// into `p` (p.compiled_from_cache() is then true) or compile and store it.
void compile_through_cache(program& p, const target& t, const compile_options& options);

}  // namespace kiln
