// http.static: static files (server/src/static/ serves them). RoadRunner's keys (dir, forbid, allow,
// calculate_etag, weak, request, response) and Ferry's (index, precompressed, cache_control, on_forbidden,
// on_missing, follow_symlinks, max_open_files). "static" in http.middleware turns it on (keys_http.cpp).
#include "keys.hpp"

namespace ferry::conf::keys {

namespace {

std::optional<schema::Problem> php_or(const schema::Value &value, const std::string &shown,
                                      const char *status)
{
    const auto &v = std::get<std::string>(value);
    if (v == "php" || v == status)
        return std::nullopt;
    return schema::Problem{shown + " is not a valid value (expected \"php\" or \"" + status + "\")", {}};
}
std::optional<schema::Problem> php_or_403(const schema::Value &value, const std::string &shown)
{
    return php_or(value, shown, "403");
}
std::optional<schema::Problem> php_or_404(const schema::Value &value, const std::string &shown)
{
    return php_or(value, shown, "404");
}
StaticFallback parse_fallback(std::string_view word)
{
    return word == "php" ? StaticFallback::php : StaticFallback::status;
}
std::string_view forbidden_word(StaticFallback f)
{
    return f == StaticFallback::php ? "php" : "403";
}
std::string_view missing_word(StaticFallback f)
{
    return f == StaticFallback::php ? "php" : "404";
}

// ".css" or "css": stored with the dot, lower-cased, so that matching is one comparison. "" is the extension
// of a name without one ("Makefile"), as RoadRunner (Go's filepath.Ext) reads it: its own reference config
// forbids "".
std::optional<schema::Problem> extensions(const schema::Value &value, const std::string &)
{
    const auto &list = std::get<std::vector<std::string>>(value);
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string &e = list[i];
        if (e == "." || e.find_first_of("/\\", 0) != std::string::npos || e.find('\0') != std::string::npos)
            return schema::Problem{"\"" + e + "\" is not a file extension (expected e.g. \".css\")", i};
    }
    return std::nullopt;
}

// An index file name: no path.
std::optional<schema::Problem> file_names(const schema::Value &value, const std::string &)
{
    const auto &list = std::get<std::vector<std::string>>(value);
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string &e = list[i];
        if (e.empty() || e == "." || e == ".." || e.find('/') != std::string::npos ||
            e.find('\0') != std::string::npos)
            return schema::Problem{"\"" + e + "\" is not a file name (expected e.g. \"index.html\")", i};
    }
    return std::nullopt;
}

std::optional<schema::Problem> header_value(const schema::Value &value, const std::string &shown)
{
    if (std::get<std::string>(value).find_first_of("\r\n\0", 0, 3) == std::string::npos)
        return std::nullopt;
    return schema::Problem{shown + " is not a valid header value (expected no CR, LF or NUL)", {}};
}

std::string dotted_lower(std::string e)
{
    for (char &c : e)
        if (c >= 'A' && c <= 'Z')
            c = static_cast<char>(c - 'A' + 'a');
    return e.empty() || e.front() == '.' ? e : "." + e;
}

void resolve(StaticConfig &s)
{
    for (auto *list : {&s.forbid, &s.allow})
        for (std::string &e : *list)
            e = dotted_lower(e);
}

} // namespace

const schema::Table<StaticConfig> &static_files()
{
    using namespace schema;
    static const Table<StaticConfig> table{
        {
            string("dir", &StaticConfig::dir, "a directory")
                .described("The directory served (relative to the working directory; checked at start)."),
            list("forbid", &StaticConfig::forbid, "a list of file extensions such as \".php\"")
                .checked(extensions)
                .described("Extensions never served as files (e.g. `.php`; `\"\"` for names without one): "
                           "such a request goes to PHP (or 403, `on_forbidden`)."),
            list("allow", &StaticConfig::allow, "a list of file extensions such as \".css\"")
                .checked(extensions)
                .described("When set, only files with these extensions are served."),
            boolean("calculate_etag", &StaticConfig::calculate_etag)
                .described("A strong `ETag` from the content (CRC-32, once per file version); else from size "
                           "and time."),
            boolean("weak", &StaticConfig::weak).described("Send the ETag as weak (`W/`)."),
            headers("request", &StaticConfig::request)
                .described(
                    "RoadRunner adds these headers to a static file's request: no effect here (warned)."),
            headers("response", &StaticConfig::response)
                .described("Headers added to every file response, e.g. `{X-Frame-Options: DENY}`."),
            list("index", &StaticConfig::index, "a list of file names such as \"index.html\"")
                .checked(file_names)
                .described("Ferry's own: a directory's index files, the first found wins."),
            boolean("precompressed", &StaticConfig::precompressed)
                .described("Ferry's own: serve `foo.css.br` or `foo.css.gz` when the client accepts it."),
            boolean("compress", &StaticConfig::compress)
                .described(
                    "Ferry's own: text files (`http.compression.types`, from its `min_length` to 1 MiB) "
                    "without a precompressed sibling are compressed on the fly, once per file version, "
                    "for clients that accept gzip or br (docs/compression.md)."),
            size("compress_cache", &StaticConfig::compress_cache,
                 "a positive number of megabytes, or a size such as \"16MB\"")
                .described("Ferry's own: the compressed files kept, all loops together (least recently used "
                           "first out)."),
            string("cache_control", &StaticConfig::cache_control,
                   "a Cache-Control value such as \"max-age=3600\"")
                .checked(header_value)
                .described("Ferry's own: the `Cache-Control` of file responses, e.g. `public, max-age=3600` "
                           "(empty: none)."),
            choice("on_forbidden", &StaticConfig::on_forbidden, parse_fallback, forbidden_word, php_or_403,
                   "\"php\" or \"403\"")
                .described("Ferry's own: a forbidden or not allowed extension, or a hidden name: `php` (the "
                           "request goes to PHP) or `403`."),
            choice("on_missing", &StaticConfig::on_missing, parse_fallback, missing_word, php_or_404,
                   "\"php\" or \"404\"")
                .described("Ferry's own: no such file, or a directory without index: `php` or `404`."),
            boolean("follow_symlinks", &StaticConfig::follow_symlinks)
                .described("Ferry's own: symlinks may lead outside `dir` (else 403); a link whose target has "
                           "a part starting with `.` is a hidden name either way."),
            integer("max_open_files", &StaticConfig::max_open_files, "a positive integer", 1, 1u << 20)
                .described("Ferry's own: open files and stat results cached per event loop (at most a "
                           "quarter of the descriptor limit over all loops; unused ones closed after 3 s)."),
        },
        {},
        resolve,
    };
    return table;
}

} // namespace ferry::conf::keys
