// A LevelDB table is data blocks, an index block whose values are the data
// blocks' handles, and a fixed-size footer: two block handles (metaindex,
// index) as varints, zero padding to 40 bytes, then the 64-bit magic number.
// A block is entries (shared key prefix length, unshared length and value
// length as varints, the unshared key bytes, the value), then restart
// offsets (32-bit each) and their count; a 5-byte trailer follows each
// block (compression type, checksum).
#include "tf/sstable_reader.hpp"

#include <cstdint>
#include <utility>
#include <vector>

#include "kiln/errors.hpp"

namespace kiln::tf_import {

namespace {

constexpr std::uint64_t table_magic = 0xdb4775248b80fb57ULL;
constexpr std::size_t footer_size = 48;
constexpr std::size_t block_trailer_size = 5;

struct block_handle {
    std::uint64_t offset = 0;
    std::uint64_t size = 0;
};

class table_reader {
public:
    table_reader(const std::string& bytes, const std::string& source) : bytes_(bytes), source_(source) {}

    std::map<std::string, std::string> read() {
        if (bytes_.size() < footer_size)
            bad("shorter than a table footer (" + std::to_string(bytes_.size()) + " bytes)");
        std::size_t footer = bytes_.size() - footer_size;
        if (fixed64(bytes_.size() - 8) != table_magic) bad("no table magic number at the end (truncated?)");
        std::size_t pos = footer;
        read_handle(pos, footer + 40);  // the metaindex block: bloom filters, never needed here
        block_handle index = read_handle(pos, footer + 40);
        std::map<std::string, std::string> entries;
        for (auto& [last_key, handle_bytes] : block_entries(index, "index block")) {
            std::size_t hpos = 0;
            block_handle data = decode_handle(handle_bytes, hpos);
            for (auto& [key, value] : block_entries(data, "data block for keys up to '" + last_key + "'"))
                entries[std::move(key)] = std::move(value);
        }
        return entries;
    }

private:
    [[noreturn]] void bad(const std::string& what) const {
        fail(error_kind::parse_error, source_ + ": not a valid tensor bundle index (LevelDB table): " + what);
    }

    std::uint64_t fixed64(std::size_t pos) const {
        std::uint64_t v = 0;
        for (int i = 7; i >= 0; --i)
            v = (v << 8) | static_cast<unsigned char>(bytes_[pos + static_cast<std::size_t>(i)]);
        return v;
    }

    static std::uint32_t fixed32(const std::string& s, std::size_t pos) {
        std::uint32_t v = 0;
        for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s[pos + static_cast<std::size_t>(i)]);
        return v;
    }

    // A little-endian base-128 varint of s at pos (advanced), below `end`.
    std::uint64_t varint(const std::string& s, std::size_t& pos, std::size_t end) const {
        std::uint64_t v = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (pos >= end) bad("a varint runs past its block");
            auto byte = static_cast<unsigned char>(s[pos++]);
            v |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
            if ((byte & 0x80) == 0) return v;
        }
        bad("a varint longer than 10 bytes");
    }

    block_handle decode_handle(const std::string& s, std::size_t& pos) const {
        block_handle h;
        h.offset = varint(s, pos, s.size());
        h.size = varint(s, pos, s.size());
        return h;
    }

    block_handle read_handle(std::size_t& pos, std::size_t end) const {
        block_handle h;
        h.offset = varint(bytes_, pos, end);
        h.size = varint(bytes_, pos, end);
        return h;
    }

    // The contents of a block, checked to lie inside the file and uncompressed.
    std::string block(const block_handle& h, const std::string& what) const {
        std::size_t limit = bytes_.size() - footer_size;
        if (h.offset > limit || h.size > limit - h.offset || block_trailer_size > limit - h.offset - h.size)
            bad(what + " at offset " + std::to_string(h.offset) + " (" + std::to_string(h.size) +
                " bytes) runs past the end of the file");
        auto type = static_cast<unsigned char>(bytes_[h.offset + h.size]);
        if (type == 1)
            fail(error_kind::not_implemented, source_ + ": " + what +
                                                  " is snappy-compressed; Kiln reads only uncompressed tensor bundle "
                                                  "indexes (as TensorFlow writes them)");
        if (type != 0) bad(what + " has unknown compression type " + std::to_string(type));
        return bytes_.substr(h.offset, h.size);
    }

    std::vector<std::pair<std::string, std::string>> block_entries(const block_handle& h,
                                                                   const std::string& what) const {
        std::string b = block(h, what);
        if (b.size() < 4) bad(what + " is shorter than its restart count");
        std::uint64_t restarts = fixed32(b, b.size() - 4);
        if (restarts > (b.size() - 4) / 4) bad(what + " has more restart points than bytes");
        std::size_t end = b.size() - 4 - static_cast<std::size_t>(restarts) * 4;
        std::vector<std::pair<std::string, std::string>> out;
        std::string key;
        std::size_t pos = 0;
        while (pos < end) {
            std::uint64_t shared = varint(b, pos, end);
            std::uint64_t unshared = varint(b, pos, end);
            std::uint64_t value_size = varint(b, pos, end);
            if (shared > key.size()) bad(what + ": an entry shares more of the previous key than it has");
            if (unshared > end - pos || value_size > end - pos - unshared) bad(what + ": an entry runs past its block");
            key = key.substr(0, shared) + b.substr(pos, unshared);
            pos += unshared;
            out.emplace_back(key, b.substr(pos, value_size));
            pos += value_size;
        }
        return out;
    }

    const std::string& bytes_;
    const std::string& source_;
};

}  // namespace

std::map<std::string, std::string> read_sstable(const std::string& bytes, const std::string& source) {
    return table_reader(bytes, source).read();
}

}  // namespace kiln::tf_import
