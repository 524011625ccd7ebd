// Static files compressed on the fly (internal to server/; http.static.compress): one loop's cache of
// compressed files by path and coding, each valid for the file version (its ETag) it was made from, the least
// recently used dropped past the loop's share of http.static.compress_cache. A file being compressed is
// marked so that other requests for it meanwhile get the file as it is rather than compress it again.
#pragma once

#include "compress/encoder.hpp"
#include "compress/policy.hpp"

#include <cstddef>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ferry::server::detail {

class CompressedCache {
public:
    // Files larger than this are not compressed on the fly (precompress them: http.static.precompressed).
    static constexpr std::uint64_t max_file = 1024 * 1024;

    // `capacity`: bytes of compressed files kept; `counters`: the server's gauge of them (may be null).
    CompressedCache(std::size_t capacity, compress::Counters *counters);
    ~CompressedCache();
    CompressedCache(const CompressedCache &) = delete;
    CompressedCache &operator=(const CompressedCache &) = delete;

    // The compressed bytes of `path` in `coding` made from the version `etag`, or null (then an older version
    // is dropped).
    std::shared_ptr<const std::string> find(std::string_view path, compress::Coding coding,
                                            std::string_view etag);
    // Keeps `bytes` (unless larger than a quarter of the capacity), dropping the least recently used past it.
    void put(std::string_view path, compress::Coding coding, std::string etag,
             std::shared_ptr<const std::string> bytes);
    // Marks `path` in `coding` as being compressed; false if it is already.
    bool start(std::string_view path, compress::Coding coding);
    void done(std::string_view path, compress::Coding coding);

    std::size_t bytes() const { return bytes_; }
    std::size_t entries() const { return index_.size(); }

private:
    struct Entry {
        std::string key, etag;
        std::shared_ptr<const std::string> bytes;
    };
    static std::string key_of(std::string_view path, compress::Coding coding);
    void drop(std::list<Entry>::iterator it);

    std::size_t capacity_, bytes_ = 0;
    compress::Counters *counters_;
    std::list<Entry> lru_; // most recently used first
    std::unordered_map<std::string, std::list<Entry>::iterator> index_;
    std::unordered_map<std::string, bool> busy_;
};

} // namespace ferry::server::detail
