#include "io/file_header.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <string_view>

#include "kiln/errors.hpp"
#include "kiln/serialize.hpp"
#include "kiln/version.hpp"

namespace kiln::io {

void fail_parse(const std::string& source, const std::string& what) {
    fail(error_kind::parse_error, source + ": " + what);
}

std::uint32_t checksum(const unsigned char* data, std::size_t size, std::uint32_t running) {
    uLong crc = running;
    constexpr std::size_t chunk = std::numeric_limits<uInt>::max();
    while (size > 0) {
        std::size_t n = std::min(size, chunk);
        crc = crc32(crc, data, static_cast<uInt>(n));
        data += n;
        size -= n;
    }
    return static_cast<std::uint32_t>(crc);
}

namespace {

void put_u32(unsigned char* p, std::uint32_t v) {
    for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
void put_u64(unsigned char* p, std::uint64_t v) {
    for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
std::uint32_t get_u32(const unsigned char* p) {
    std::uint32_t v = 0;
    for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}
std::uint64_t get_u64(const unsigned char* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// The Kiln version that wrote the image, read without trusting the layout
// after the version field: every format starts the metadata at byte 64 with
// its "producer" member, so even a file too new to read names its writer.
std::string recorded_producer(const unsigned char* data, std::size_t size) {
    static constexpr std::string_view prefix = "{\"producer\":\"";
    constexpr std::size_t longest = 64;
    std::string out;
    if (size > header_size + prefix.size() &&
        std::memcmp(data + header_size, prefix.data(), prefix.size()) == 0)
        for (std::size_t i = header_size + prefix.size(); i < size && out.size() < longest; ++i) {
            const char c = static_cast<char>(data[i]);
            if (c == '"') return out.empty() ? "an unknown Kiln version" : out;
            if (c < ' ' || c > '~') break;  // printable ASCII only: it goes into an error message
            out += c;
        }
    return "an unknown Kiln version";
}

bool starts_with_magic(const unsigned char* data, std::size_t size) {
    std::size_t n = std::min(size, file_magic.size());
    return std::memcmp(data, file_magic.data(), n) == 0;
}

}  // namespace

void write_header(file_header h, unsigned char* out, std::size_t total_size) {
    std::memcpy(out, file_magic.data(), file_magic.size());
    put_u32(out + 8, h.version);
    put_u32(out + 12, h.flags);
    put_u64(out + 16, h.metadata_offset);
    put_u64(out + 24, h.metadata_size);
    put_u64(out + 32, h.data_offset);
    put_u64(out + 40, h.data_size);
    put_u64(out + 48, total_size);
    h.file_size = total_size;
    put_u32(out + 56, checksum(out + header_size, body_checksum_end(h) - header_size));
    put_u32(out + 60, checksum(out, 60));
}

file_header parse_header(const unsigned char* data, std::size_t available, std::size_t size,
                         const std::string& source) {
    if (available < std::min(size, header_size))
        fail(error_kind::runtime, "parse_header: " + std::to_string(available) + " bytes of the header given");
    if (size == 0) fail_parse(source, "the file is empty; not a Kiln program file");
    if (!starts_with_magic(data, size))
        fail_parse(source, "not a Kiln program file (it does not start with the .kiln magic bytes)");
    if (size < header_size)
        fail_parse(source, "truncated: " + std::to_string(size) + " bytes, shorter than the " +
                               std::to_string(header_size) + "-byte header");

    file_header h;
    h.version = get_u32(data + 8);
    // The version field never moves, so it is checked before fields whose layout a newer version may change.
    if (h.version > kiln_format_version)
        fail_parse(source, "written in .kiln format version " + std::to_string(h.version) + " by " +
                               recorded_producer(data, std::min(available, size)) + "; this build (kiln " + kiln::version +
                               ") reads format versions " + std::to_string(oldest_format_version) + " to " +
                               std::to_string(kiln_format_version) + ": upgrade Kiln to load it");
    if (get_u32(data + 60) != checksum(data, 60)) fail_parse(source, "the header is corrupt (checksum mismatch)");
    if (h.version < oldest_format_version)
        fail_parse(source, "invalid format version " + std::to_string(h.version));
    h.flags = get_u32(data + 12);
    if ((h.flags & ~known_flags) != 0) fail_parse(source, "unknown header flags " + std::to_string(h.flags));
    h.metadata_offset = get_u64(data + 16);
    h.metadata_size = get_u64(data + 24);
    h.data_offset = get_u64(data + 32);
    h.data_size = get_u64(data + 40);
    h.file_size = get_u64(data + 48);
    h.body_crc = get_u32(data + 56);

    if (h.file_size > size)
        fail_parse(source, "truncated: the header records " + std::to_string(h.file_size) + " bytes but only " +
                               std::to_string(size) + " are present");
    if (h.file_size < size)
        fail_parse(source, std::to_string(size - h.file_size) + " unexpected bytes after the recorded end of the file");
    // Sections in order, each inside the file; written as subtractions so no sum can overflow.
    auto section_error = [&](const std::string& what) { fail_parse(source, "invalid section layout: " + what); };
    if (h.metadata_offset != header_size) section_error("metadata does not follow the header");
    if (h.metadata_size == 0 || h.metadata_size > size - h.metadata_offset)
        section_error("metadata size " + std::to_string(h.metadata_size) + " does not fit in the file");
    if (h.data_offset < h.metadata_offset + h.metadata_size || h.data_offset > size)
        section_error("data offset " + std::to_string(h.data_offset) + " is outside the file or overlaps the metadata");
    if (h.data_offset % data_alignment != 0)
        section_error("data offset " + std::to_string(h.data_offset) + " is not 64-byte aligned");
    if (h.data_size != size - h.data_offset)
        section_error("data size " + std::to_string(h.data_size) + " does not reach the end of the file");
    return h;
}

std::uint64_t body_checksum_end(const file_header& h) {
    return h.version >= first_version_with_data_checksum ? h.data_offset : h.file_size;
}

void check_body(const file_header& h, const unsigned char* image, const std::string& source) {
    if (h.body_crc != checksum(image + header_size, body_checksum_end(h) - header_size))
        fail_parse(source, "the contents are corrupt (checksum mismatch)");
}

file_header read_header(const unsigned char* data, std::size_t size, const std::string& source) {
    file_header h = parse_header(data, size, size, source);
    check_body(h, data, source);
    return h;
}

}  // namespace kiln::io
