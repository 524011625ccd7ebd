#include "response.hpp"

#include "ferry/server/http_grammar.hpp"

#include <charconv>
#include <ctime>

namespace ferry::server::detail {

std::string_view reason_phrase(int s)
{
    switch (s) {
    case 100:
        return "Continue";
    case 101:
        return "Switching Protocols";
    case 102:
        return "Processing";
    case 103:
        return "Early Hints";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 203:
        return "Non-Authoritative Information";
    case 204:
        return "No Content";
    case 205:
        return "Reset Content";
    case 206:
        return "Partial Content";
    case 207:
        return "Multi-Status";
    case 300:
        return "Multiple Choices";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 303:
        return "See Other";
    case 304:
        return "Not Modified";
    case 307:
        return "Temporary Redirect";
    case 308:
        return "Permanent Redirect";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 402:
        return "Payment Required";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 406:
        return "Not Acceptable";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 412:
        return "Precondition Failed";
    case 413:
        return "Content Too Large";
    case 414:
        return "URI Too Long";
    case 415:
        return "Unsupported Media Type";
    case 416:
        return "Range Not Satisfiable";
    case 417:
        return "Expectation Failed";
    case 418:
        return "I'm a teapot";
    case 421:
        return "Misdirected Request";
    case 422:
        return "Unprocessable Content";
    case 425:
        return "Too Early";
    case 426:
        return "Upgrade Required";
    case 428:
        return "Precondition Required";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 451:
        return "Unavailable For Legal Reasons";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

std::size_t format_http_date(std::time_t t, char (&buf)[64])
{
    std::tm tm{};
    gmtime_r(&t, &tm);
    return std::strftime(buf, sizeof buf, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

std::string_view http_date()
{
    static thread_local std::time_t cached_at = 0;
    static thread_local char buf[64];
    static thread_local std::size_t len = 0;
    std::time_t now = std::time(nullptr);
    if (now != cached_at) {
        cached_at = now;
        len = format_http_date(now, buf);
    }
    return {buf, len};
}

bool no_body_status(int s)
{
    return (s >= 100 && s < 200) || s == 204 || s == 304;
}

namespace {

bool valid_value(std::string_view v)
{
    for (unsigned char c : v)
        if (c == '\r' || c == '\n' || c == '\0')
            return false;
    return true;
}

void append_uint(std::string &out, std::uint64_t v)
{
    char tmp[24];
    auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    out.append(tmp, r.ptr);
}

} // namespace

bool names_trailer(const std::vector<std::string> &names, std::string_view name)
{
    for (const auto &n : names)
        if (iequals(n, name))
            return true;
    return false;
}

bool declares_trailers(const relay::ResponseContext &rc)
{
    for (const auto &f : rc.headers)
        if (iequals(f.name, "Trailer"))
            return true;
    return false;
}

std::vector<std::string> declared_trailers(const relay::ResponseContext &rc)
{
    std::vector<std::string> names;
    for (const auto &f : rc.headers) {
        if (!iequals(f.name, "Trailer"))
            continue;
        for (std::string_view list : f.values) {
            while (!list.empty()) {
                const auto comma = list.find(',');
                std::string_view n = trim_ows(list.substr(0, comma));
                // Never framing or routing fields (RFC 9110 §6.5.1): those stay headers.
                if (!n.empty() && is_token(n) && !iequals(n, "Content-Length") &&
                    !iequals(n, "Transfer-Encoding") && !iequals(n, "Host") && !iequals(n, "Trailer") &&
                    !iequals(n, "Content-Type"))
                    names.emplace_back(n);
                if (comma == list.npos)
                    break;
                list.remove_prefix(comma + 1);
            }
        }
    }
    return names;
}

std::string trailer_lines(const relay::ResponseContext &rc, const std::vector<std::string> &names)
{
    std::string out;
    for (const auto &f : rc.headers) {
        if (!names_trailer(names, f.name) || !is_token(f.name))
            continue;
        for (const auto &v : f.values)
            if (valid_value(v))
                out.append(f.name).append(": ").append(v).append("\r\n");
    }
    return out;
}

namespace {

// A Vary header's values already cover Accept-Encoding ("*" covers everything).
bool vary_names_accept_encoding(const std::vector<std::string> &values)
{
    for (std::string_view v : values)
        if (list_has(v, "Accept-Encoding") || list_has(v, "*"))
            return true;
    return false;
}

} // namespace

void append_head(std::string &out, const Head &h, int *dropped)
{
    out += "HTTP/1.1 ";
    append_uint(out, static_cast<std::uint64_t>(h.status));
    out += ' ';
    out += reason_phrase(h.status);
    out += "\r\n";
    bool has_server = false, has_date = false, has_retry_after = false, has_vary = false;
    if (h.worker) {
        for (const auto &f : h.worker->headers) {
            if (iequals(f.name, "Content-Length") || iequals(f.name, "Transfer-Encoding") ||
                iequals(f.name, "Connection") || iequals(f.name, "Keep-Alive") ||
                (h.reserved && h.reserved(f.name)) || (h.trailers && names_trailer(*h.trailers, f.name)))
                continue;
            if (!is_token(f.name)) {
                if (dropped)
                    ++*dropped;
                continue;
            }
            if (iequals(f.name, "Server"))
                has_server = true;
            if (iequals(f.name, "Date"))
                has_date = true;
            if (iequals(f.name, "Retry-After"))
                has_retry_after = true;
            const bool etag = !h.content_encoding.empty() && iequals(f.name, "ETag");
            if (h.vary_accept_encoding && iequals(f.name, "Vary"))
                has_vary |= vary_names_accept_encoding(f.values);
            for (const auto &v : f.values) {
                if (!valid_value(v)) {
                    if (dropped)
                        ++*dropped;
                    continue;
                }
                out += f.name;
                out += ": ";
                if (etag && v.starts_with('"')) // the compressed bytes are not the ones a strong tag names
                    out += "W/";
                out += v;
                out += "\r\n";
            }
        }
    } else if (!h.content_type.empty()) {
        out += "Content-Type: ";
        out += h.content_type;
        out += "\r\n";
    }
    out += h.extra;
    if (!h.content_encoding.empty()) {
        out += "Content-Encoding: ";
        out += h.content_encoding;
        out += "\r\n";
    }
    if (h.vary_accept_encoding && !has_vary)
        out += "Vary: Accept-Encoding\r\n";
    if (!has_server)
        out += "Server: ferry\r\n";
    if (!has_date) {
        out += "Date: ";
        out += http_date();
        out += "\r\n";
    }
    switch (h.framing) {
    case Framing::length:
        out += "Content-Length: ";
        append_uint(out, h.content_length);
        out += "\r\n";
        break;
    case Framing::chunked:
        out += "Transfer-Encoding: chunked\r\n";
        break;
    case Framing::close:
    case Framing::none:
        break;
    }
    if (h.status == 503 && !has_retry_after) // every 503 says when to come back
        out += "Retry-After: 1\r\n";
    if (h.status >= 200) {
        if (!h.keep_alive || h.framing == Framing::close)
            out += "Connection: close\r\n";
        else if (h.http10)
            out += "Connection: keep-alive\r\n";
    }
    out += "\r\n";
}

void append_text(std::string &out, int status, std::string_view body, bool keep_alive, bool head_request,
                 std::string_view extra)
{
    Head h;
    h.status = status;
    h.content_type = "text/plain; charset=utf-8";
    h.extra = extra;
    h.content_length = body.size();
    h.keep_alive = keep_alive;
    append_head(out, h);
    if (!head_request)
        out += body;
}

void append_error(std::string &out, int status, std::string_view detail, bool keep_alive, bool head_request,
                  std::string_view extra)
{
    std::string body;
    body.reserve(64 + detail.size());
    body += std::to_string(status);
    body += ' ';
    body += reason_phrase(status);
    if (!detail.empty()) {
        body += ": ";
        body += detail;
    }
    body += '\n';
    append_text(out, status, body, keep_alive, head_request, extra);
}

} // namespace ferry::server::detail
