// http.compression (Ferry's own; server/src/compress/): what PHP responses are compressed and how, when
// http.middleware lists "gzip" (keys_http.cpp turns it on).
#include "keys.hpp"

#include <algorithm>
#include <cctype>

namespace ferry::conf::keys {

namespace {

bool token(std::string_view s)
{
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char c) {
        return std::isalnum(c) ||
               std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
    });
}

// "type/subtype" or "type/*", lower-cased by resolve().
std::optional<schema::Problem> media_types(const schema::Value &value, const std::string &)
{
    const auto &list = std::get<std::vector<std::string>>(value);
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string &t = list[i];
        const auto slash = t.find('/');
        if (slash == std::string::npos || !token(std::string_view(t).substr(0, slash)) ||
            !token(std::string_view(t).substr(slash + 1)) || t.substr(0, slash) == "*")
            return schema::Problem{"\"" + t +
                                       "\" is not a media type (expected e.g. \"application/json\" or "
                                       "\"text/*\")",
                                   i};
    }
    return std::nullopt;
}

void resolve(CompressionConfig &c)
{
    for (std::string &t : c.types)
        std::transform(t.begin(), t.end(), t.begin(), [](unsigned char ch) { return std::tolower(ch); });
}

} // namespace

const schema::Table<CompressionConfig> &compression()
{
    using namespace schema;
    static const Table<CompressionConfig> table{
        {
            list("types", &CompressionConfig::types, "a list of media types such as \"application/json\"")
                .checked(media_types)
                .described("The media types compressed (`text/*` for a whole type); the default is text, "
                           "JSON, JavaScript, XML and SVG (docs/compression.md)."),
            integer("min_length", &CompressionConfig::min_length, "a number of bytes", 0, 1u << 30)
                .described("Whole bodies shorter than this go uncompressed (streamed ones are compressed "
                           "whatever their length)."),
            integer("gzip_level", &CompressionConfig::gzip_level, "an integer from 1 to 9", 1, 9)
                .described("gzip's level: 1 is the fastest (nginx's default too), 9 the smallest."),
            boolean("brotli", &CompressionConfig::brotli)
                .described("Brotli for clients that accept it (`br` in Accept-Encoding) and rank it above "
                           "gzip, or as high when `prefer` is `br`."),
            string("prefer", &CompressionConfig::prefer, "\"gzip\" or \"br\"")
                .checked([](const schema::Value &v, const std::string &shown) {
                    return one_of(v, shown, {"gzip", "br"}, "\"gzip\" or \"br\"");
                })
                .described("The coding sent when the client ranks gzip and br alike (browsers do): `gzip` is "
                           "~4× faster at a few per cent more bytes (docs/compression.md)."),
            integer("brotli_quality", &CompressionConfig::brotli_quality, "an integer from 0 to 11", 0, 11)
                .described("Brotli's quality: 0 is the fastest, 11 the smallest."),
            integer("max_streams", &CompressionConfig::max_streams, "a positive integer", 1, 1u << 20)
                .described(
                    "Encoders held at once, all loops together (~270 KiB each): streamed and large "
                    "bodies, static files being compressed; past it the body or file goes uncompressed."),
        },
        {},
        resolve,
    };
    return table;
}

} // namespace ferry::conf::keys
