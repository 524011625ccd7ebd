#include "urlencoded.hpp"

#include "ferry/server/http_grammar.hpp"

#include <string>

namespace ferry::server::detail {
namespace {

void decode(std::string_view in, std::string &out)
{
    out.clear();
    out.reserve(in.size());
    std::size_t i = 0;
    while (i < in.size()) {
        // Copy the run of plain bytes at once: most names and values have no escape at all.
        std::size_t run = i;
        while (run < in.size() && in[run] != '+' && in[run] != '%')
            ++run;
        out.append(in.data() + i, run - i);
        if (run == in.size())
            break;
        i = run;
        if (in[i] == '+') {
            out += ' ';
            ++i;
        } else if (i + 2 < in.size() && hex_value(in[i + 1]) >= 0 && hex_value(in[i + 2]) >= 0) {
            out += static_cast<char>(hex_value(in[i + 1]) * 16 + hex_value(in[i + 2]));
            i += 3;
        } else {
            out += '%'; // PHP keeps a malformed escape as it is
            ++i;
        }
    }
}

} // namespace

Result<void> parse_urlencoded(std::string_view body, relay::FormTree &form)
{
    std::string name, value;
    while (!body.empty()) {
        std::size_t amp = body.find('&');
        std::string_view pair = body.substr(0, amp);
        body = amp == std::string_view::npos ? std::string_view() : body.substr(amp + 1);
        if (pair.empty())
            continue;
        std::size_t eq = pair.find('=');
        decode(pair.substr(0, eq), name);
        decode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1), value);
        if (auto r = form.add(name, value); !r)
            return r;
    }
    return {};
}

bool is_urlencoded(std::string_view content_type)
{
    return iequals(trim_ows(content_type.substr(0, content_type.find(';'))),
                   "application/x-www-form-urlencoded");
}

} // namespace ferry::server::detail
