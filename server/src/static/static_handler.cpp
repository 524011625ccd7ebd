#include "static_handler.hpp"

#include "../http/response.hpp"
#include "../transport/transport.hpp"
#include "conditional.hpp"
#include "ferry/base/log.hpp"
#include "file_answer.hpp"
#include "path.hpp"

#include <algorithm>
#include <fcntl.h>
#include <unistd.h>

namespace ferry::server::detail {
namespace {

using Kind = StaticHandler::Decision::Kind;

void add_header(std::string &out, std::string_view name, std::string_view value)
{
    out += name;
    out += ": ";
    out += value;
    out += "\r\n";
}

class StaticConnection final : public Handler::Connection {
public:
    explicit StaticConnection(StaticHandler &h) : handler_(h) {}
    BodySink *body_sink(const Request &req) override
    {
        decision_ = handler_.take_decision(req); // at the head: the decision accepts() just made
        return nullptr;
    }
    awaitable<After> handle(Exchange &ex) override;
    void release_idle_memory(bool) override { decision_ = {}; } // no file kept open by an idle connection

private:
    StaticHandler &handler_;
    StaticHandler::Decision decision_; // this request's, from its head
    std::string extra_;                // this response's header lines (reused)
};

awaitable<After> StaticConnection::handle(Exchange &ex)
{
    const Request &req = ex.request;
    const bool head = req.method == "HEAD";
    const After done = ex.keep_alive ? After::keep_alive : After::close;
    StaticHandler::Decision d = std::move(decision_);
    decision_ = {};
    switch (d.kind) {
    case Kind::php: // not reached: accepts() said no
    case Kind::not_found:
        ex.status = 404;
        append_error(ex.out, 404, "no such file", ex.keep_alive, head);
        co_return done;
    case Kind::forbidden:
        ex.status = 403;
        append_error(ex.out, 403, "this path is not served", ex.keep_alive, head);
        co_return done;
    case Kind::unavailable: // the file may well exist: the server has no descriptor left to open it now
        ex.status = 503;
        append_error(ex.out, 503, "the server is out of file descriptors; try again shortly", ex.keep_alive,
                     head); // with Retry-After, as every 503
        co_return done;
    case Kind::redirect: {
        std::string_view target = req.target;
        std::string_view path = target_path(target);
        auto q = target.find('?');
        // "//evil.example/dir" names the directory evil.example/dir here, but as a Location it would be a
        // protocol-relative URL to another site: one leading slash only.
        while (path.size() > 1 && path[1] == '/')
            path.remove_prefix(1);
        extra_.clear();
        extra_ += "Location: ";
        extra_ += path;
        extra_ += '/';
        if (q != std::string_view::npos)
            extra_ += target.substr(q);
        extra_ += "\r\n";
        Head h;
        h.status = 301;
        h.extra = extra_;
        h.keep_alive = ex.keep_alive;
        h.http10 = req.http10();
        ex.status = h.status;
        append_head(ex.out, h);
        co_return done;
    }
    case Kind::serve:
        break;
    }

    const StaticFile &f = *d.file;
    std::shared_ptr<const CompressedFile> packed;
    if (d.compress != compress::Coding::identity) {
        packed = co_await handler_.compressed(&d);
    }
    if (packed)
        d.encoding = compress::coding_name(d.compress);
    extra_.clear();
    add_header(extra_, "Last-Modified", f.last_modified);
    add_header(extra_, "ETag", packed ? packed->etag : f.etag);
    if (!d.encoding.empty())
        add_header(extra_, "Content-Encoding", d.encoding);
    if (d.vary)
        add_header(extra_, "Vary", "Accept-Encoding");
    extra_ += handler_.extra_headers();

    Head h;
    h.keep_alive = ex.keep_alive;
    h.http10 = req.http10();
    h.content_type = d.content_type;
    FileAnswer answer;
    answer.fd = f.fd;
    answer.size = f.size;
    answer.mtime = f.mtime.tv_sec;
    answer.etag = packed ? packed->etag : f.etag;
    answer.log_name = "static";
    answer.data = packed ? &packed->bytes : nullptr;
    std::shared_ptr<const StaticFile> keep = d.file; // open until sent, even if the cache drops it
    co_return co_await answer_with_file(ex, answer, h, extra_);
}

} // namespace

int open_static_root(const std::string &dir)
{
    return ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
}

StaticHandler::StaticHandler(const conf::StaticConfig &config, int root_fd, const MimeTypes &mime,
                             std::size_t max_open, DescriptorRefusals *refusals,
                             const conf::CompressionConfig *compression, std::size_t compress_capacity,
                             compress::Counters *counters)
    : config_(config), forbidden_status_(config.on_forbidden == conf::StaticFallback::status),
      missing_status_(config.on_missing == conf::StaticFallback::status),
      cache_(root_fd, config, mime, max_open, refusals), compression_(compression), counters_(counters)
{
    if (config.compress && compression)
        compressed_ = std::make_unique<CompressedCache>(compress_capacity, counters);
    if (!config.cache_control.empty())
        add_header(extra_, "Cache-Control", config.cache_control);
    for (const auto &[name, value] : config.response)
        add_header(extra_, name, value);
}

std::unique_ptr<Handler::Connection> StaticHandler::connect()
{
    return std::make_unique<StaticConnection>(*this);
}

StaticHandler::Decision StaticHandler::fall_through(bool configured_status, Kind status) const
{
    Decision d;
    d.kind = configured_status ? status : Kind::php;
    return d;
}

bool StaticHandler::accepts(const Request &req) const
{
    last_decision_ = decide(req);
    last_request_ = &req;
    return last_decision_.kind != Decision::Kind::php;
}

StaticHandler::Decision StaticHandler::take_decision(const Request &req) const
{
    if (last_request_ != &req)
        return decide(req);
    last_request_ = nullptr;
    return std::move(last_decision_);
}

StaticHandler::Decision StaticHandler::decide(const Request &req) const
{
    if (req.method != "GET" && req.method != "HEAD")
        return {};
    const auto now = FileCache::clock::now();
    const std::string_view raw = target_path(req.target);
    if (auto it = to_php_.find(raw); it != to_php_.end()) {
        if (now - it->second < FileCache::revalidate_after)
            return {};
        to_php_.erase(it);
    }
    Decision d = decide_uncached(req, now);
    if (d.kind == Decision::Kind::php && raw.size() <= FileCache::max_cached_path) {
        if (to_php_.size() >= config_.max_open_files)
            to_php_.clear(); // bounded; the paths in use come back at their next request
        to_php_.emplace(raw, now);
    }
    return d;
}

StaticHandler::Decision StaticHandler::decide_uncached(const Request &req,
                                                       FileCache::clock::time_point now) const
{
    const bool forbidden_status = forbidden_status_;
    const bool missing_status = missing_status_;
    StaticPath p = resolve_static_path(req.target);
    if (p.kind == StaticPath::Kind::traversal) {
        Decision d;
        d.kind = Kind::forbidden;
        return d;
    }
    if (p.kind == StaticPath::Kind::hidden)
        return fall_through(forbidden_status, Kind::forbidden);

    Decision unavailable;
    unavailable.kind = Kind::unavailable;
    FoundFile found = cache_.find(p.rel, now);
    std::string rel = std::move(p.rel);
    if (found.kind == FoundFile::Kind::exhausted)
        return unavailable;
    if (found.kind == FoundFile::Kind::hidden) // a symlink to a dotfile: as that dotfile's own URL
        return fall_through(forbidden_status, Kind::forbidden);
    if (found.kind == FoundFile::Kind::directory) {
        FoundFile index;
        std::string candidate;
        for (const std::string &name : config_.index) {
            candidate = rel.empty() ? name : rel + "/" + name;
            index = cache_.find(candidate, now);
            if (index.kind == FoundFile::Kind::file)
                break;
            if (index.kind == FoundFile::Kind::exhausted)
                return unavailable;
        }
        if (index.kind != FoundFile::Kind::file)
            return fall_through(missing_status, Kind::not_found);
        if (!p.trailing_slash) {
            Decision d;
            d.kind = Kind::redirect;
            return d;
        }
        rel = std::move(candidate);
        found = std::move(index);
    } else if (found.kind == FoundFile::Kind::file && p.trailing_slash) {
        return fall_through(missing_status, Kind::not_found); // "/site.css/" names no file
    }
    if (found.kind == FoundFile::Kind::missing)
        return fall_through(missing_status, Kind::not_found);
    if (found.kind == FoundFile::Kind::forbidden) {
        Decision d;
        d.kind = Kind::forbidden;
        return d;
    }

    if (extension_denied(config_, rel))
        return fall_through(forbidden_status, Kind::forbidden);

    Decision d;
    d.kind = Kind::serve;
    d.file = std::move(found.file);
    d.content_type = d.file->content_type;
    if (config_.precompressed) {
        std::string_view accept = req.header("Accept-Encoding");
        static constexpr std::pair<std::string_view, std::string_view> codings[] = {{"br", ".br"},
                                                                                    {"gzip", ".gz"}};
        for (const auto &[coding, suffix] : codings) {
            const FoundFile &sibling = cache_.find(rel + std::string(suffix), now);
            if (sibling.kind != FoundFile::Kind::file)
                continue;
            d.vary = true;
            if (d.encoding.empty() && accept_encoding_q(accept, coding) > 0) {
                d.encoding = coding;
                d.file = sibling.file;
            }
        }
    }
    if (compressed_ && d.encoding.empty() && d.file->size >= compression_->min_length &&
        d.file->size <= compressed_->max_file() &&
        compress::type_listed(compression_->types, d.content_type)) {
        d.vary = true;
        if (req.header("Range").empty()) { // a range is of the file as it is
            d.compress = compress::choose(*compression_, req.header("Accept-Encoding"));
            if (d.compress != compress::Coding::identity)
                d.path = std::move(rel);
        }
    }
    return d;
}

awaitable<std::shared_ptr<const CompressedFile>> StaticHandler::compressed(const Decision *d)
{
    const StaticFile &f = *d->file;
    if (auto hit = compressed_->find(d->path, d->compress, f.etag))
        co_return hit;
    // Being made by another request, or as many encoders held as http.compression.max_streams allows (each
    // holds its state until the file is done): this request gets the file as it is.
    if (!compressed_->start(d->path, d->compress))
        co_return nullptr;
    if (!counters_ || !counters_->take_stream(compression_->max_streams)) {
        compressed_->done(d->path, d->compress);
        co_return nullptr;
    }
    struct Done { // the mark and the encoder's slot go whatever happens to this coroutine
        CompressedCache &cache;
        compress::Counters &counters;
        const Decision &d;
        ~Done()
        {
            cache.done(d.path, d.compress);
            counters.give_stream();
        }
    } done{*compressed_, *counters_, *d};
    // Made once per file version: at least gzip 6 and brotli 5 (the per-response levels are for speed).
    const int level = d->compress == compress::Coding::br ? std::max(compression_->brotli_quality, 5)
                                                          : std::max(compression_->gzip_level, 6);
    compress::Encoder encoder(d->compress, level, f.size);
    std::string out;
    std::string slice(std::min<std::uint64_t>(f.size, compress::slice_size), '\0');
    std::uint64_t at = 0;
    do {
        if (at > 0) { // a slice's CPU at a time: the loop's other connections go between them
            co_await compress::yield_to_loop();
        }
        const std::size_t want = static_cast<std::size_t>(std::min<std::uint64_t>(slice.size(), f.size - at));
        const ssize_t n = ::pread(f.fd, slice.data(), want, static_cast<off_t>(at));
        if (n != static_cast<ssize_t>(want)) { // changed under us: sent as it is, compressed next time
            log::debug("static", "a file changed while it was compressed; sent as it is");
            co_return nullptr;
        }
        at += want;
        const auto flush = at == f.size ? compress::Encoder::Flush::finish : compress::Encoder::Flush::none;
        if (!encoder.write(std::string_view(slice.data(), want), flush, out))
            co_return nullptr;
    } while (at < f.size);
    co_return compressed_->put(d->path, d->compress, f.etag, std::move(out));
}

} // namespace ferry::server::detail
