#include "multipart.hpp"

#include "ferry/base/text.hpp"
#include "ferry/server/http_grammar.hpp"

#include <algorithm>
#include <cctype>
#include <functional>

namespace ferry::server::detail {
namespace {

HttpError malformed(std::string why)
{
    return HttpError{400, "malformed multipart body: " + std::move(why)};
}

// The parameters of a header value after its first ';': key=value or key="quoted \" value".
template <typename F> void each_param(std::string_view value, F &&f)
{
    std::size_t i = value.find(';');
    while (i != std::string_view::npos && i < value.size()) {
        ++i;
        std::size_t eq = value.find('=', i);
        if (eq == std::string_view::npos)
            return;
        std::string_view key = trim_ows(value.substr(i, eq - i));
        std::size_t j = eq + 1;
        while (j < value.size() && (value[j] == ' ' || value[j] == '\t'))
            ++j;
        std::string v;
        if (j < value.size() && value[j] == '"') {
            for (++j; j < value.size() && value[j] != '"'; ++j) {
                if (value[j] == '\\' && j + 1 < value.size())
                    ++j;
                v += value[j];
            }
            i = value.find(';', j);
        } else {
            std::size_t end = value.find(';', j);
            v = std::string(trim_ows(value.substr(j, end == std::string_view::npos ? end : end - j)));
            i = end;
        }
        f(key, std::move(v));
    }
}

} // namespace

bool MultipartParser::is_multipart(std::string_view content_type)
{
    return iequals(trim_ows(content_type.substr(0, content_type.find(';'))), "multipart/form-data");
}

std::optional<std::string> MultipartParser::boundary_of(std::string_view content_type)
{
    if (!is_multipart(content_type))
        return std::nullopt;
    std::optional<std::string> found;
    each_param(content_type, [&](std::string_view key, std::string value) {
        if (iequals(key, "boundary") && !found)
            found = std::move(value);
    });
    if (!found || found->empty() || found->size() > 70 || found->back() == ' ')
        return std::nullopt;
    for (unsigned char c : *found) // RFC 2046 bchars
        if (!(std::isalnum(c) ||
              std::string_view("'()+_,-./:=? ").find(static_cast<char>(c)) != std::string_view::npos))
            return std::nullopt;
    return found;
}

MultipartParser::MultipartParser(std::string_view boundary, Limits limits, MultipartHandler &handler)
    : limits_(limits), handler_(handler)
{
    reset(boundary);
}

void MultipartParser::reset(std::string_view boundary)
{
    delimiter_ = "\r\n--";
    delimiter_.append(boundary);
    state_ = State::preamble;
    buf_ = "\r\n"; // the first boundary may open the body: a virtual CRLF makes it a delimiter too
    parts_ = 0;
}

HttpResult<void> MultipartParser::parse_headers(std::string_view block)
{
    part_ = PartHeaders{};
    bool disposition = false;
    while (!block.empty()) {
        std::size_t eol = block.find("\r\n");
        std::string_view line = block.substr(0, eol);
        block = eol == std::string_view::npos ? std::string_view() : block.substr(eol + 2);
        std::size_t colon = line.find(':');
        if (colon == std::string_view::npos || !is_token(line.substr(0, colon)))
            return malformed("part header line \"" + printable(line) + "\"");
        std::string_view name = line.substr(0, colon), value = trim_ows(line.substr(colon + 1));
        if (iequals(name, "Content-Disposition")) {
            if (!iequals(trim_ows(value.substr(0, value.find(';'))), "form-data"))
                return malformed("a part's Content-Disposition is not form-data");
            disposition = true;
            each_param(value, [&](std::string_view key, std::string v) {
                if (iequals(key, "name"))
                    part_.name = std::move(v);
                else if (iequals(key, "filename"))
                    part_.filename = std::move(v);
            });
        } else if (iequals(name, "Content-Type")) {
            part_.content_type.assign(value);
        }
    }
    if (!disposition)
        return malformed("a part without Content-Disposition");
    return {};
}

HttpResult<void> MultipartParser::step(bool &progress)
{
    progress = false;
    switch (state_) {
    case State::preamble:
    case State::body: {
        // A delimiter is CRLF "--" boundary followed by "--" or by padding and CRLF; anything else after it
        // is content (as Go's mime/multipart, which RoadRunner uses, reads it).
        std::size_t from = 0, at = std::string::npos, data = 0;
        const std::boyer_moore_horspool_searcher search(delimiter_.begin(), delimiter_.end());
        for (;;) {
            auto it = std::search(buf_.begin() + static_cast<std::ptrdiff_t>(from), buf_.end(), search);
            if (it == buf_.end()) {
                // All but a tail that may begin a delimiter is content.
                data = buf_.size() > delimiter_.size() ? buf_.size() - delimiter_.size() + 1 : 0;
                break;
            }
            std::size_t pos = static_cast<std::size_t>(it - buf_.begin());
            std::size_t i = pos + delimiter_.size();
            if (buf_.size() - i >= 2 && buf_.compare(i, 2, "--") == 0) {
                at = pos;
                break;
            }
            while (i < buf_.size() && i - pos - delimiter_.size() <= 256 &&
                   (buf_[i] == ' ' || buf_[i] == '\t'))
                ++i;
            if (buf_.size() - i < 2 && i - pos - delimiter_.size() <= 256) {
                data = pos; // not known yet: wait for more bytes, keeping the candidate
                break;
            }
            if (buf_.compare(i, 2, "\r\n") == 0) {
                at = pos;
                break;
            }
            from = pos + 1; // content that looks like a boundary
        }
        bool found = at != std::string::npos;
        if (found)
            data = at;
        if (state_ == State::body && data > 0)
            if (auto r = handler_.part_data(std::string_view(buf_).substr(0, data)); !r)
                return r;
        if (found) {
            if (state_ == State::body)
                if (auto r = handler_.part_end(); !r)
                    return r;
            buf_.erase(0, at + delimiter_.size());
            state_ = State::after_delimiter;
            progress = true;
        } else if (data > 0) {
            buf_.erase(0, data);
        }
        return {};
    }
    case State::after_delimiter: {
        if (buf_.size() >= 2 && buf_.compare(0, 2, "--") == 0) {
            state_ = State::done;
            buf_.clear();
            progress = true;
            return {};
        }
        std::size_t i = 0;
        while (i < buf_.size() && (buf_[i] == ' ' || buf_[i] == '\t')) // transport padding (RFC 2046)
            ++i;
        if (i > 256)
            return malformed("a boundary line that does not end");
        if (buf_.size() < i + 2)
            return {};
        if (buf_.compare(i, 2, "\r\n") != 0)
            return malformed("a boundary not followed by CRLF or \"--\"");
        buf_.erase(0, i + 2);
        if (++parts_ > limits_.max_parts)
            return HttpError{400,
                             "more than " + std::to_string(limits_.max_parts) +
                                 " parts in a multipart body (the limit is http.limits.max_form_fields)"};
        state_ = State::headers;
        progress = true;
        return {};
    }
    case State::headers: {
        std::size_t end = buf_.compare(0, 2, "\r\n") == 0 ? 0 : buf_.find("\r\n\r\n");
        if (end == std::string::npos) {
            // Up to 3 bytes may begin the CRLFCRLF that ends the block: beyond that, the block is too large
            // whenever it ends (the status must not depend on where a read splits the body).
            if (buf_.size() > limits_.max_part_header + 3)
                return HttpError{400, "a multipart part header larger than " +
                                          std::to_string(limits_.max_part_header) + " bytes"};
            return {};
        }
        if (end > limits_.max_part_header)
            return HttpError{400, "a multipart part header larger than " +
                                      std::to_string(limits_.max_part_header) + " bytes"};
        if (auto r = parse_headers(std::string_view(buf_).substr(0, end)); !r)
            return r;
        buf_.erase(0, end == 0 ? 2 : end + 4);
        if (auto r = handler_.part_begin(part_); !r)
            return r;
        // The part's body starts with what follows; a delimiter right away means an empty part.
        state_ = State::body;
        progress = true;
        return {};
    }
    case State::done:
        buf_.clear(); // the epilogue is ignored
        return {};
    }
    return {};
}

HttpResult<void> MultipartParser::feed(std::string_view bytes)
{
    buf_.append(bytes.data(), bytes.size());
    bool progress = true;
    while (progress)
        if (auto r = step(progress); !r)
            return r;
    return {};
}

HttpResult<void> MultipartParser::finish()
{
    if (state_ != State::done)
        return malformed("the body ends without the final boundary");
    return {};
}

} // namespace ferry::server::detail
