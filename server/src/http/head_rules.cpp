#include "head_rules.hpp"

#include "ferry/base/text.hpp"

namespace ferry::server::detail {

// Host, target form, Content-Length and Transfer-Encoding rules (RFC 9112 §3.2, §6.1, §6.3).
HttpResult<void> check_head(Request &r, std::string &last_valid_host)
{
    int hosts = 0, lengths = 0;
    std::string_view host;
    bool te = false, te_chunked_last = false;
    int chunked_seen = 0;
    std::string_view other_coding;
    for (const auto &[name, value] : r.headers) {
        if (iequals(name, "Host")) {
            ++hosts;
            host = value;
        } else if (iequals(name, "Content-Length")) {
            ++lengths;
        } else if (iequals(name, "Transfer-Encoding")) {
            te = true;
            std::string_view rest = value;
            while (!rest.empty()) {
                auto comma = rest.find(',');
                std::string_view item = rest.substr(0, comma);
                rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
                while (!item.empty() && (item.front() == ' ' || item.front() == '\t'))
                    item.remove_prefix(1);
                while (!item.empty() && (item.back() == ' ' || item.back() == '\t'))
                    item.remove_suffix(1);
                if (item.empty())
                    continue; // empty list elements are allowed (RFC 9110 §5.6.1)
                te_chunked_last = iequals(item, "chunked");
                if (te_chunked_last)
                    ++chunked_seen;
                else if (other_coding.empty())
                    other_coding = item;
            }
        }
    }
    if (hosts > 1)
        return HttpError{400, "more than one Host header"};
    if (r.version_minor >= 1 && hosts == 0)
        return HttpError{400, "missing required Host header"};
    if (hosts == 1 && host != last_valid_host) { // a connection's requests usually repeat their Host
        if (!valid_host(host))
            return HttpError{400, "invalid Host header \"" + printable(host) + "\""};
        last_valid_host.assign(host);
    }
    if (lengths > 1)
        return HttpError{400, "more than one Content-Length header"};
    if (te) {
        if (lengths > 0)
            return HttpError{400, "both Content-Length and Transfer-Encoding"};
        if (r.version_minor == 0)
            return HttpError{400, "Transfer-Encoding in an HTTP/1.0 request"};
        if (!te_chunked_last || chunked_seen != 1)
            return HttpError{400, "Transfer-Encoding must end with a single \"chunked\""};
        if (!other_coding.empty())
            return HttpError{501, "unsupported transfer coding \"" + printable(other_coding) + "\""};
    }
    if (r.method == "CONNECT")
        return HttpError{405, "CONNECT is not supported"};
    Target t = classify_target(r.target);
    switch (t.form) {
    case TargetForm::origin:
        break;
    case TargetForm::absolute:
        r.authority.assign(t.authority);
        break;
    case TargetForm::asterisk:
        if (r.method != "OPTIONS")
            return HttpError{400, "request target \"*\" is only valid with OPTIONS"};
        break;
    case TargetForm::authority:
    case TargetForm::invalid:
        return HttpError{400, "invalid request target \"" + printable(r.target) + "\""};
    }
    r.form = t.form;
    return {};
}

} // namespace ferry::server::detail
