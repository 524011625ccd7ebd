// Static files compressed on the fly (internal to server/; http.static.compress): one loop's cache of
// compressed files by path and coding, each valid for the file version (its ETag) it was made from, the least
// recently used dropped past the loop's share of http.static.compress_cache. A file being compressed is
// marked so that other requests for it meanwhile get the file as it is rather than compress it again.
#pragma once

#include "compress/encoder.hpp"
#include "compress/policy.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace ferry::server::detail {

// A file's compressed copy and the ETag it is sent with (the file's, made weak: the bytes differ).
struct CompressedFile {
    std::string bytes, etag;
};

class CompressedCache {
public:
    // Files larger than this are not compressed on the fly (precompress them: http.static.precompressed).
    static constexpr std::uint64_t max_file_ever = 1024 * 1024;

    // `capacity`: bytes of compressed files kept; `counters`: the server's gauge of them (may be null).
    CompressedCache(std::size_t capacity, compress::Counters *counters);
    ~CompressedCache();
    CompressedCache(const CompressedCache &) = delete;
    CompressedCache &operator=(const CompressedCache &) = delete;

    // The largest file compressed: max_file_ever, or less when a quarter of the capacity is less (a file
    // whose copy could not be kept would be compressed again at every request).
    std::uint64_t max_file() const { return std::min<std::uint64_t>(max_file_ever, capacity_ / 4); }
    // The copy of `path` in `coding` made from the file version `file_etag`, or null (then an older version
    // is dropped).
    std::shared_ptr<const CompressedFile> find(std::string_view path, compress::Coding coding,
                                               std::string_view file_etag);
    // The copy of `path` made of `bytes` from the version `file_etag`, kept (unless larger than a quarter of
    // the capacity, or a little more) with the least recently used dropped past the capacity.
    std::shared_ptr<const CompressedFile> put(std::string_view path, compress::Coding coding,
                                              std::string_view file_etag, std::string bytes);
    // Marks `path` in `coding` as being compressed; false if it is already.
    bool start(std::string_view path, compress::Coding coding);
    void done(std::string_view path, compress::Coding coding);

    std::size_t bytes() const { return bytes_; }
    std::size_t entries() const { return index_.size(); }

private:
    struct Entry {
        std::string key, file_etag;
        std::shared_ptr<const CompressedFile> file;
    };
    // The key of `path` in `coding`, in key_ (a lookup allocates nothing once key_ has grown).
    const std::string &key_of(std::string_view path, compress::Coding coding);
    void drop(std::list<Entry>::iterator it);

    std::size_t capacity_, bytes_ = 0;
    compress::Counters *counters_;
    std::list<Entry> lru_; // most recently used first
    std::unordered_map<std::string, std::list<Entry>::iterator> index_;
    std::unordered_set<std::string> busy_;
    std::string key_;
};

} // namespace ferry::server::detail
