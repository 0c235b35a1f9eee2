// Little-endian byte writing and bounds-checked reading for the storage
// codecs. Every multi-byte integer Twice stores on disk goes through here so
// the on-disk byte order never depends on the host.
#ifndef TWICE_STORAGE_BYTE_IO_H_
#define TWICE_STORAGE_BYTE_IO_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace twice::storage {

inline void AppendU8(std::string& out, uint8_t v) {
  out.push_back(static_cast<char>(v));
}

inline void AppendU32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

inline void AppendU64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>(v >> (8 * i)));
}

inline void AppendI64(std::string& out, int64_t v) {
  AppendU64(out, static_cast<uint64_t>(v));
}

// u32 length, then the bytes. Callers bound the length first (see
// kMaxFieldBytes users); a string past 4 GiB is never a valid field.
inline void AppendLengthPrefixed(std::string& out, std::string_view s) {
  AppendU32(out, static_cast<uint32_t>(s.size()));
  out.append(s);
}

inline uint32_t LoadU32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) {
    v |= static_cast<uint32_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  }
  return v;
}

inline uint64_t LoadU64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) {
    v |= static_cast<uint64_t>(static_cast<uint8_t>(p[i])) << (8 * i);
  }
  return v;
}

// Reads from a byte string without ever reading past its end: every Read*
// returns false once the input is exhausted, and the reader stays failed, so
// decoders may check once at the end of a group of reads.
class ByteReader {
 public:
  explicit ByteReader(std::string_view data) : data_(data) {}

  [[nodiscard]] bool ReadU8(uint8_t& v) {
    if (!Need(1)) return false;
    v = static_cast<uint8_t>(data_[pos_]);
    pos_ += 1;
    return true;
  }
  [[nodiscard]] bool ReadU32(uint32_t& v) {
    if (!Need(4)) return false;
    v = LoadU32(data_.data() + pos_);
    pos_ += 4;
    return true;
  }
  [[nodiscard]] bool ReadU64(uint64_t& v) {
    if (!Need(8)) return false;
    v = LoadU64(data_.data() + pos_);
    pos_ += 8;
    return true;
  }
  [[nodiscard]] bool ReadI64(int64_t& v) {
    uint64_t u = 0;
    if (!ReadU64(u)) return false;
    v = static_cast<int64_t>(u);
    return true;
  }
  [[nodiscard]] bool ReadBytes(size_t n, std::string_view& v) {
    if (!Need(n)) return false;
    v = data_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  [[nodiscard]] bool ReadLengthPrefixed(std::string_view& v) {
    uint32_t n = 0;
    return ReadU32(n) && ReadBytes(n, v);
  }

  size_t remaining() const { return failed_ ? 0 : data_.size() - pos_; }
  bool failed() const { return failed_; }

 private:
  bool Need(size_t n) {
    if (failed_ || n > data_.size() - pos_) {
      failed_ = true;
      return false;
    }
    return true;
  }

  std::string_view data_;
  size_t pos_ = 0;
  bool failed_ = false;
};

}  // namespace twice::storage

#endif  // TWICE_STORAGE_BYTE_IO_H_
