// The static files handler (internal to server/; http.static, docs/http.md "Static files"): serves GET and
// HEAD for files under http.static.dir with sendfile(2), conditional requests, single byte ranges and
// precompressed siblings; everything it does not serve falls through to the next handler (PHP).
#pragma once

#include "../handlers/handler.hpp"
#include "compressed_cache.hpp"
#include "file_cache.hpp"
#include "mime.hpp"

#include "ferry/conf/config.hpp"

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ferry::server::detail {

class StaticHandler final : public Handler {
public:
    // `root_fd`: http.static.dir opened with O_PATH | O_DIRECTORY, owned by the caller. `max_open`: the file
    // cache's bound (0: http.static.max_open_files), which the server lowers under a low descriptor limit.
    // `refusals`: FileCache's.
    // `compression`: http.compression, for http.static.compress (its types, min_length and codings);
    // `compress_capacity`: this loop's share of compress_cache; `counters`: the gauge of what it holds.
    StaticHandler(const conf::StaticConfig &config, int root_fd, const MimeTypes &mime,
                  std::size_t max_open = 0, DescriptorRefusals *refusals = nullptr,
                  const conf::CompressionConfig *compression = nullptr, std::size_t compress_capacity = 0,
                  compress::Counters *counters = nullptr);
    std::string_view name() const override { return "static"; }
    // Decides, and keeps the decision for take_decision(): the session asks body_sink() of the chosen
    // handler right after accepts(), with no suspension between, so a served file is looked up once.
    bool accepts(const Request &req) const override;
    std::unique_ptr<Connection> connect() override;

    struct Decision {
        enum class Kind { php, serve, redirect, forbidden, not_found, unavailable /* no descriptor: 503 */ };
        Kind kind = Kind::php;
        std::shared_ptr<const StaticFile> file; // serve: the file, or its precompressed sibling
        std::string_view content_type;          // serve: the type of the file asked for
        std::string_view encoding;              // serve: "br", "gzip" or "" (identity)
        bool vary = false; // serve: a precompressed sibling exists, or it may be compressed
        compress::Coding compress = compress::Coding::identity; // serve: compress the file on the fly so
        std::string path; // ... keyed by this path (http.static.compress)
    };
    // What to do with a request (a cache lookup or a few; no system call while the cache is fresh).
    Decision decide(const Request &req) const;
    // The decision accepts() made for `req`, if it was the last request it saw; else decides now.
    Decision take_decision(const Request &req) const;
    // The loop's ticker: closes the cached files unused for FileCache::inactive.
    void sweep(FileCache::clock::time_point now) { cache_.sweep(now); }
    std::size_t cache_capacity() const { return cache_.capacity(); }
    // Raw paths remembered as PHP's (bounded by max_open_files; for tests).
    std::size_t remembered_php_paths() const { return to_php_.size(); }
    // The file of `d` compressed as d->compress says: from the cache, or made now in slices (the loop served
    // between them, the encoder counted against http.compression.max_streams) and kept; null when another
    // request is making it, max_streams encoders are busy, or reading the file fails (this request then gets
    // the file as it is).
    awaitable<std::shared_ptr<const CompressedFile>> compressed(const Decision *d);
    std::size_t compressed_bytes() const { return compressed_ ? compressed_->bytes() : 0; }
    // Header lines every file response carries (Cache-Control, http.static.response), preformatted.
    const std::string &extra_headers() const { return extra_; }

private:
    struct PathHash {
        using is_transparent = void;
        std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };

    Decision decide_uncached(const Request &req, FileCache::clock::time_point now) const;
    Decision fall_through(bool configured_status, Decision::Kind status) const;

    const conf::StaticConfig &config_;
    const bool forbidden_status_; // on_forbidden: "403"
    const bool missing_status_;   // on_missing: "404"
    mutable FileCache cache_;     // per event loop: no lock
    const conf::CompressionConfig *compression_;
    compress::Counters *counters_;
    std::unique_ptr<CompressedCache> compressed_; // http.static.compress (per event loop)
    // Raw request paths that went to PHP, and when that was decided: a PHP route costs one lookup, not a
    // path decode and file lookups, for as long as a cached file result holds (FileCache::revalidate_after).
    mutable std::unordered_map<std::string, FileCache::clock::time_point, PathHash, std::equal_to<>> to_php_;
    mutable const Request *last_request_ = nullptr; // the request accepts() decided last ...
    mutable Decision last_decision_;                // ... and what it decided
    std::string extra_;
};

// Opens http.static.dir for a StaticHandler; -1 with errno set when it is not a readable directory.
int open_static_root(const std::string &dir);

} // namespace ferry::server::detail
