// HTTP/1.1 grammar checks on request parts that end up in what PHP routes on (RFC 9110, RFC 9112, RFC 3986).
#pragma once

#include <string_view>

namespace ferry::server {

// RFC 9110 §7.2 Host = uri-host [ ":" port ], uri-host = IP-literal / IPv4address / reg-name. Accepts the
// empty value (a request without authority); rejects anything that would change the URI PHP parses:
// "/", "?", "#", "@", spaces, a non-numeric or too long port, an unclosed "[".
bool valid_host(std::string_view host);

// The request-target forms of RFC 9112 §3.2.
enum class TargetForm { origin, absolute, authority, asterisk, invalid };

struct Target {
    TargetForm form = TargetForm::invalid;
    std::string_view authority; // absolute-form: the host[:port] after "scheme://"
    std::string_view path;      // origin- and absolute-form: "/p?q" ("" for "http://a" and "http://a?q")
};

// Classifies a request-target. origin-form starts with "/"; absolute-form is "http://" or "https://"
// (any case) + valid_host() + path-abempty [ "?" query ]; "*" is asterisk-form. A "#" anywhere, userinfo
// ("user@host"), or another scheme make it invalid.
Target classify_target(std::string_view target);

} // namespace ferry::server
