#include "mime.hpp"

#include "ferry/server/http_grammar.hpp"

#include <fstream>
#include <sstream>

namespace ferry::server::detail {
namespace {

bool wants_charset(std::string_view type)
{
    return type.starts_with("text/") || type == "application/javascript" || type == "application/json" ||
           type == "application/manifest+json";
}

} // namespace

MimeTypes::MimeTypes(const std::string &path)
{
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) {
        if (auto hash = line.find('#'); hash != std::string::npos)
            line.resize(hash);
        std::istringstream words(line);
        std::string type, ext;
        if (!(words >> type))
            continue;
        if (wants_charset(type))
            type += "; charset=utf-8";
        while (words >> ext)
            types_.emplace(ascii_lower(ext), type); // the first type listed for an extension wins
    }
}

std::string_view MimeTypes::for_file(std::string_view name) const
{
    static const std::string fallback = "application/octet-stream";
    auto slash = name.rfind('/');
    if (slash != std::string_view::npos)
        name.remove_prefix(slash + 1);
    auto dot = name.rfind('.');
    if (dot == std::string_view::npos || dot + 1 == name.size())
        return fallback;
    auto it = types_.find(ascii_lower(name.substr(dot + 1)));
    return it == types_.end() ? std::string_view(fallback) : std::string_view(it->second);
}

} // namespace ferry::server::detail
