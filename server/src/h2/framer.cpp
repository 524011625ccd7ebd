#include "h2/framer.hpp"

#include "ferry/server/http_grammar.hpp"

#include <algorithm>
#include <charconv>

namespace ferry::server::detail::h2 {

namespace {

bool hop_by_hop(std::string_view name)
{
    return name == "connection" || name == "keep-alive" || name == "transfer-encoding" || name == "upgrade" ||
           name == "proxy-connection";
}

} // namespace

bool Framer::fail(std::string why)
{
    state_ = State::failed;
    error_ = std::move(why);
    return false;
}

bool Framer::take_body(std::string_view &in, Sink &sink)
{
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(left_, in.size()));
    sink.on_data(in.substr(0, n));
    in.remove_prefix(n);
    left_ -= n;
    return left_ == 0;
}

bool Framer::feed(std::string_view in, Sink &sink)
{
    while (!in.empty()) {
        switch (state_) {
        case State::head: {
            // The head ends at the first blank line; it may come in pieces.
            const std::size_t before = line_.size();
            line_.append(in);
            auto end = line_.find("\r\n\r\n", before >= 3 ? before - 3 : 0);
            if (end == std::string::npos) {
                if (line_.size() > 1024 * 1024)
                    return fail("a response head larger than 1 MiB");
                return true;
            }
            const std::size_t used = end + 4 - before; // bytes of `in` up to the blank line
            std::string head = std::move(line_);
            line_.clear();
            head.resize(end + 2);
            in.remove_prefix(used);
            if (!parse_head(head, sink))
                return false;
            break;
        }
        case State::length:
            if (take_body(in, sink)) {
                state_ = State::done;
                sink.on_end();
            }
            break;
        case State::chunk_size:
        case State::chunk_crlf:
        case State::trailers: {
            auto nl = in.find('\n');
            line_.append(in.substr(0, nl == in.npos ? in.size() : nl + 1));
            if (line_.size() > 4096)
                return fail("a chunk line longer than 4 KiB");
            if (nl == in.npos)
                return true;
            in.remove_prefix(nl + 1);
            std::string line = std::move(line_);
            line_.clear();
            if (state_ == State::chunk_crlf) {
                if (line != "\r\n")
                    return fail("a chunk not followed by CRLF");
                state_ = State::chunk_size;
            } else if (state_ == State::trailers) {
                if (line == "\r\n") {
                    state_ = State::done;
                    if (!trailers_.empty())
                        sink.on_trailers(trailers_);
                    sink.on_end();
                } else {
                    auto colon = line.find(':');
                    if (colon == 0 || colon == line.npos || !line.ends_with("\r\n"))
                        return fail("a bad trailer line");
                    std::string name = ascii_lower(std::string_view(line).substr(0, colon));
                    std::string_view value =
                        trim_ows(std::string_view(line).substr(colon + 1, line.size() - colon - 3));
                    if (!hop_by_hop(name))
                        trailers_.emplace_back(std::move(name), std::string(value));
                }
            } else {
                std::uint64_t size = 0;
                auto r = std::from_chars(line.data(), line.data() + line.size(), size, 16);
                if (r.ec != std::errc() || r.ptr == line.data())
                    return fail("a bad chunk size");
                if (size == 0) {
                    state_ = State::trailers;
                } else {
                    left_ = size;
                    state_ = State::chunk_data;
                }
            }
            break;
        }
        case State::chunk_data:
            if (take_body(in, sink))
                state_ = State::chunk_crlf;
            break;
        case State::until_end:
            sink.on_data(in);
            in = {};
            break;
        case State::done:
            return fail("bytes after the end of the response");
        case State::failed:
            return false;
        }
    }
    return true;
}

void Framer::skip(std::uint64_t n, Sink &sink)
{
    if (state_ != State::length)
        return;
    left_ -= std::min(n, left_);
    if (left_ == 0) {
        state_ = State::done;
        sink.on_end();
    }
}

bool Framer::parse_head(std::string_view head, Sink &sink)
{
    // "HTTP/1.1 200 OK\r\n" then "Name: value\r\n" lines.
    auto eol = head.find("\r\n");
    std::string_view status_line = head.substr(0, eol);
    if (!status_line.starts_with("HTTP/1.") || status_line.size() < 12)
        return fail("a response that does not start with a status line");
    int status = 0;
    auto r = std::from_chars(status_line.data() + 9, status_line.data() + 12, status);
    if (r.ec != std::errc() || status < 100 || status > 999)
        return fail("a bad status");
    Head h;
    h.status = status;
    std::uint64_t length = 0;
    bool has_length = false, chunked = false;
    head.remove_prefix(eol + 2);
    while (!head.empty()) {
        eol = head.find("\r\n");
        std::string_view line = head.substr(0, eol);
        head.remove_prefix(eol == head.npos ? head.size() : eol + 2);
        auto colon = line.find(':');
        if (colon == line.npos || colon == 0)
            return fail("a header line without a name");
        std::string name = ascii_lower(line.substr(0, colon));
        std::string_view value = trim_ows(line.substr(colon + 1));
        if (name == "transfer-encoding") {
            chunked = iequals(value, "chunked");
            continue;
        }
        if (name == "content-length") {
            auto lr = std::from_chars(value.data(), value.data() + value.size(), length);
            if (lr.ec != std::errc())
                return fail("a bad Content-Length");
            has_length = true;
        }
        if (hop_by_hop(name))
            continue;
        h.fields.emplace_back(std::move(name), std::string(value));
    }
    started_ = true;
    if (status < 200) {
        if (status == 101)
            return fail("a protocol switch (101) on an HTTP/2 stream");
        sink.on_head(h); // the final head still to come
        return true;
    }
    const bool no_body = head_request_ || status == 204 || status == 304;
    if (no_body || (has_length && length == 0 && !chunked)) {
        h.body = false;
        state_ = State::done;
        sink.on_head(h);
        sink.on_end();
        return true;
    }
    h.body = true;
    if (chunked) {
        state_ = State::chunk_size;
    } else if (has_length) {
        state_ = State::length;
        left_ = length;
    } else {
        state_ = State::until_end; // the body runs to the writer's end (finish())
    }
    sink.on_head(h);
    return true;
}

} // namespace ferry::server::detail::h2
