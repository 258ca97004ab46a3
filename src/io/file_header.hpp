#pragma once
// The fixed binary header at the start of every .kiln file. Fields are stored
// little-endian at fixed offsets, independent of struct layout:
//
//   0  magic[8]          "\x89KILN\r\n\x1a" (binary-safe like PNG's: catches
//                        text-mode and 7-bit transfers)
//   8  u32 version       format version, kiln_format_version when written
//   12 u32 flags         bit 0: the program is compiled; other bits reserved (0)
//   16 u64 metadata_offset, 24 u64 metadata_size   the JSON section
//   32 u64 data_offset,     40 u64 data_size       literal bytes, 64-byte aligned
//   48 u64 file_size     total size, so truncation is reported as such
//   56 u32 body_crc      zlib crc32 of the bytes after the header: up to the
//                        data section from version 2 on (the metadata's
//                        "data_crc32" covers the data, so loading need not
//                        read every weight); to the end of the file in version 1
//   60 u32 header_crc    zlib crc32 of bytes 0..59
//
// Bytes 0..11 keep this layout in every version, and every version starts the
// metadata at byte 64 with its "producer" member, so that a reader can name
// the version and writer of a file too new for it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::io {

inline constexpr std::size_t header_size = 64;
inline constexpr std::size_t data_alignment = 64;
inline constexpr std::array<unsigned char, 8> file_magic = {0x89, 'K', 'I', 'L', 'N', '\r', '\n', 0x1a};
inline constexpr std::uint32_t flag_compiled = 1u;
inline constexpr std::uint32_t known_flags = flag_compiled;

struct file_header {
    std::uint32_t version = 0;
    std::uint32_t flags = 0;
    std::uint64_t metadata_offset = 0;
    std::uint64_t metadata_size = 0;
    std::uint64_t data_offset = 0;
    std::uint64_t data_size = 0;
    std::uint64_t file_size = 0;
    std::uint32_t body_crc = 0;
};

// Raises error_kind::parse_error as "<source>: <what>".
[[noreturn]] void fail_parse(const std::string& source, const std::string& what);

// zlib crc32 over any length (zlib takes 32-bit lengths per call), continuing
// from `running`, the checksum of the bytes before.
std::uint32_t checksum(const unsigned char* data, std::size_t size, std::uint32_t running = 0);

// Fills the first header_size bytes of `out` (which holds the whole file,
// body already in place), computing both checksums.
void write_header(file_header h, unsigned char* out, std::size_t total_size);

// The first format whose body checksum stops at the data section.
inline constexpr std::uint32_t first_version_with_data_checksum = 2;

// Validates the header against a file of `file_size` bytes: magic, version,
// flags, header checksum, section bounds. `available` bytes of the file's
// start are at `image`, at least min(file_size, header_size) (a few more let
// the error for a file too new name its producer). Failures raise
// error_kind::parse_error naming `source`.
file_header parse_header(const unsigned char* image, std::size_t available, std::size_t file_size,
                         const std::string& source);

// Where the body checksum's bytes end (see body_crc above).
std::uint64_t body_checksum_end(const file_header& h);

// Checks body_crc over `image`, which holds at least body_checksum_end(h) bytes.
void check_body(const file_header& h, const unsigned char* image, const std::string& source);

// parse_header and check_body of a whole `size`-byte image.
file_header read_header(const unsigned char* data, std::size_t size, const std::string& source);

// Rounds up to the data alignment.
constexpr std::uint64_t align_up(std::uint64_t n) {
    return (n + data_alignment - 1) / data_alignment * data_alignment;
}

}  // namespace kiln::io
