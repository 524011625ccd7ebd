#include "file_answer.hpp"

#include "../transport/transport.hpp"
#include "conditional.hpp"
#include "ferry/base/log.hpp"

#include <array>

namespace ferry::server::detail {

awaitable<After> answer_with_file(Exchange &ex, const FileAnswer &f, Head h, std::string &extra)
{
    const Request &req = ex.request;
    const bool head = req.method == "HEAD";
    const After done = ex.keep_alive ? After::keep_alive : After::close;

    // RFC 9110 §13.2.2: If-None-Match decides when present, else If-Modified-Since.
    bool not_modified = false;
    if (h.status == 200) {
        if (std::string_view inm = req.header("If-None-Match"); !inm.empty()) {
            not_modified = !f.etag.empty() && none_match_hits(inm, f.etag);
        } else if (std::string_view ims = req.header("If-Modified-Since"); !ims.empty()) {
            auto t = parse_http_date(ims);
            not_modified = t && f.mtime <= *t;
        }
    }
    if (not_modified) {
        h.status = 304;
        h.content_type = {}; // only the validators and caching headers go with a 304 (RFC 9110 §15.4.5)
        h.framing = Framing::none;
        h.extra = extra;
        ex.status = h.status;
        append_head(ex.out, h);
        co_return done;
    }

    if (f.data) { // a compressed copy, whole
        h.framing = Framing::length;
        h.content_length = f.data->size();
        h.extra = extra;
        ex.status = h.status;
        append_head(ex.out, h);
        if (head)
            co_return done;
        std::array<asio::const_buffer, 2> bufs{asio::buffer(ex.out), asio::buffer(*f.data)};
        const bool wrote = co_await ex.transport.write(bufs);
        ex.out.clear();
        co_return wrote ? done : After::close;
    }

    std::uint64_t first = 0, length = f.size;
    if (h.status == 200) {
        extra += "Accept-Ranges: bytes\r\n";
        if (std::string_view range = req.header("Range"); !range.empty()) {
            bool honour = true;
            if (std::string_view if_range = req.header("If-Range"); !if_range.empty()) {
                if (if_range.front() == '"' || if_range.starts_with("W/")) {
                    honour = strong_etag_equal(if_range, f.etag);
                } else {
                    auto t = parse_http_date(if_range);
                    honour = t && *t == f.mtime;
                }
            }
            ByteRange r = honour ? parse_range(range, f.size) : ByteRange{};
            if (r.kind == ByteRange::Kind::unsatisfiable) {
                extra += "Content-Range: bytes */" + std::to_string(f.size) + "\r\n";
                h.status = 416;
                h.content_type = {};
                h.extra = extra;
                h.content_length = 0;
                ex.status = h.status;
                append_head(ex.out, h);
                co_return done;
            }
            if (r.kind == ByteRange::Kind::satisfiable) {
                h.status = 206;
                first = r.first;
                length = r.length;
                extra += "Content-Range: bytes " + std::to_string(first) + "-" +
                         std::to_string(first + length - 1) + "/" + std::to_string(f.size) + "\r\n";
            }
        }
    }
    h.framing = Framing::length;
    h.content_length = length;
    h.extra = extra;
    ex.status = h.status;
    append_head(ex.out, h);
    if (head || length == 0)
        co_return done;

    // Earlier pipelined answers and this head go out now, the body right behind them from the file.
    if (!co_await ex.transport.flush(ex.out, true))
        co_return After::close;
    switch (co_await ex.transport.send_file(f.fd, first, length)) {
    case Transport::Sent::all:
        co_return done;
    case Transport::Sent::client_gone:
        co_return After::close;
    case Transport::Sent::file_short:
        log::warn(std::string(f.log_name),
                  ex.transport.remote() + " " + req.method + " " + req.target +
                      ": the file got shorter while it was sent; closing the connection");
        co_return After::close;
    }
    co_return After::close;
}

} // namespace ferry::server::detail
