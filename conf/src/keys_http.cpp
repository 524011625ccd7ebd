// http: the front end's address, request limits, timeouts and upload spooling (the pool is in keys_pool.cpp).
// `limits`, `timeouts` and `uploads` are Ferry's own sections apart from uploads.dir (docs/protocol.md
// lists RoadRunner's keys).
#include "ferry/base/text.hpp"
#include "keys.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace ferry::conf::keys {

namespace {

// http.middleware: the names Ferry acts on, RoadRunner's that it lacks (ignored), and anything else (a typo,
// with "did you mean"). Both warnings are errors with --strict: the file asks for something not done.
std::optional<std::string> middleware_names(const schema::Value &value, const std::string &)
{
    static constexpr std::string_view done[] = {"static", "sendfile", "proxy_ip_parser", "gzip"};
    static constexpr std::string_view lacking[] = {"headers", "http_metrics", "otel", "new_relic", "cache"};
    std::vector<std::string> ignored, unknown;
    for (const std::string &name : std::get<std::vector<std::string>>(value)) {
        if (std::find(std::begin(done), std::end(done), name) != std::end(done))
            continue;
        if (std::find(std::begin(lacking), std::end(lacking), name) != std::end(lacking)) {
            ignored.push_back(quote(name));
            continue;
        }
        std::string text = quote(name);
        std::string_view best;
        std::size_t best_distance = 3;
        for (auto list :
             {std::span<const std::string_view>(done), std::span<const std::string_view>(lacking)})
            for (std::string_view candidate : list)
                if (std::size_t d = schema::detail::edit_distance(name, candidate);
                    d < best_distance && d < candidate.size())
                    best = candidate, best_distance = d;
        if (!best.empty())
            text += " (did you mean " + quote(best) + "?)";
        unknown.push_back(text);
    }
    const auto joined = [](const std::vector<std::string> &items) {
        std::string out;
        for (const std::string &item : items)
            out += (out.empty() ? "" : ", ") + item;
        return out;
    };
    std::string message;
    if (!ignored.empty())
        message = "lists " + joined(ignored) + ", RoadRunner middleware that Ferry does not have";
    if (!unknown.empty())
        message += (message.empty() ? "lists " : ", and ") + joined(unknown) +
                   ", not middleware Ferry or RoadRunner knows";
    if (!message.empty())
        message += ": ignored (Ferry's are \"static\", \"sendfile\", \"gzip\" and \"proxy_ip_parser\")";
    if (message.empty())
        return std::nullopt;
    return message;
}

// "10.0.0.0/8", "fd00::/8", or one address (all of its bits).
std::optional<schema::Problem> subnets(const schema::Value &value, const std::string &)
{
    const auto &list = std::get<std::vector<std::string>>(value);
    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string &item = list[i];
        auto slash = item.find('/');
        std::string addr = item.substr(0, slash);
        unsigned char buf[16];
        int bits = ::inet_pton(AF_INET, addr.c_str(), buf) == 1    ? 32
                   : ::inet_pton(AF_INET6, addr.c_str(), buf) == 1 ? 128
                                                                   : -1;
        bool ok = bits > 0;
        if (ok && slash != std::string::npos) {
            std::string prefix = item.substr(slash + 1);
            ok = !prefix.empty() && prefix.size() <= 3 &&
                 prefix.find_first_not_of("0123456789") == std::string::npos && std::stoi(prefix) <= bits;
        }
        if (!ok)
            return schema::Problem{quote(item) +
                                       " is not a subnet (expected an address with an optional /prefix, "
                                       "e.g. \"10.0.0.0/8\" or \"::1\")",
                                   i};
    }
    return std::nullopt;
}

std::optional<schema::Problem> accept_mode(const schema::Value &value, const std::string &shown)
{
    return one_of(value, shown, {"handoff", "reuseport"}, "\"handoff\" or \"reuseport\"");
}
Accept parse_accept(std::string_view word)
{
    return word == "reuseport" ? Accept::reuseport : Accept::handoff;
}
std::string_view accept_word(Accept a)
{
    return a == Accept::reuseport ? "reuseport" : "handoff";
}

const schema::Table<HttpConfig> &uploads()
{
    using namespace schema;
    static const Table<HttpConfig> table{
        {
            string("dir", &HttpConfig::uploads_dir, "a directory for temp files")
                .described("Where large request bodies and uploaded files are written (empty: `$TMPDIR` or "
                           "`/tmp`; checked at start). Files left by a server killed with -9 are removed at "
                           "the next start."),
            list("forbid", &HttpConfig::uploads_forbid, "a list of file extensions such as \".php\"")
                .described("Uploaded files with these extensions get error 8 (`UPLOAD_ERR_EXTENSION`)."),
            list("allow", &HttpConfig::uploads_allow, "a list of file extensions such as \".jpg\"")
                .described(
                    "When set, only uploaded files with these extensions are kept; others get error 8."),
            size("max_file_size", &HttpConfig::uploads_max_file_size,
                 "a number of megabytes, or a size such as \"512KB\" (0 = no limit)", 0)
                .described("Ferry's own: the largest uploaded file (0: no limit); a larger one gets error 1 "
                           "(`UPLOAD_ERR_INI_SIZE`)."),
        },
    };
    return table;
}

const schema::Table<HttpConfig> &limits()
{
    using namespace schema;
    static const Table<HttpConfig> table{{
        size("max_request_line", &HttpConfig::max_request_line,
             "a positive number of megabytes, or a size such as \"8KB\"")
            .described("The longest request line; longer: 414."),
        size("max_header_size", &HttpConfig::max_header_size,
             "a positive number of megabytes, or a size such as \"64KB\"")
            .described("The request line and headers together; larger: 431."),
        size("body_buffer_size", &HttpConfig::body_buffer_size,
             "a positive number of megabytes, or a size such as \"1MB\"")
            .described("A request body larger than this goes to a temp file in `uploads.dir`."),
        size("max_head_memory", &HttpConfig::max_head_memory,
             "a number of megabytes, or a size such as \"64MB\" (0 = no limit)", 0)
            .described("Receive buffers past each connection's first 8 KiB (large heads, pipelined "
                       "requests), all connections together; past it new requests get 503 (0: no limit)."),
        size("max_body_memory", &HttpConfig::max_body_memory,
             "a positive number of megabytes, or a size such as \"256MB\"")
            .described("Request and response bodies, forms and multipart fields held in memory, all "
                       "connections together; one connection takes at most 1/8 (a form past it: 413)."),
        integer("max_pipelined", &HttpConfig::max_pipelined, "a positive integer", 1)
            .described("Responses batched before a flush on a pipelined connection."),
        size("max_form_size", &HttpConfig::max_form_size,
             "a positive number of megabytes, or a size such as \"8MB\"")
            .described("A urlencoded form is parsed in memory: a larger one gets 413."),
        integer("max_form_fields", &HttpConfig::max_form_fields, "a positive integer", 1)
            .described("Fields per form (PHP's `max_input_vars`): more gets 400 naming this key."),
        integer("max_form_depth", &HttpConfig::max_form_depth, "a positive integer", 1)
            .described("Brackets per field name (PHP's `max_input_nesting_level`): deeper gets 400."),
        size("min_body_rate", &HttpConfig::min_body_rate,
             "megabytes per second, or a size such as \"1KB\" per second (0 = no minimum)", 0)
            .described("Bytes per second a body must keep arriving at once `timeouts.read_body` has passed "
                       "since its first read (slower: 408; 0: no minimum)."),
    }};
    return table;
}

const schema::Table<HttpConfig> &http2()
{
    using namespace schema;
    static const Table<HttpConfig> table{{
        boolean("h2c", &HttpConfig::h2c)
            .described("HTTP/2 without TLS on `http.address`: by prior knowledge and by `Upgrade: h2c` "
                       "(HTTP/2 over TLS is always offered by ALPN)."),
        integer("max_concurrent_streams", &HttpConfig::max_concurrent_streams, "an integer from 1 to 1024", 1,
                1024)
            .described("Streams one HTTP/2 connection may have open at once (RoadRunner's default 128); "
                       "requests still running for streams the client reset count too."),
    }};
    return table;
}

const schema::Table<HttpConfig> &timeouts()
{
    using namespace schema;
    static const Table<HttpConfig> table{{
        duration("read_header", &HttpConfig::read_header_timeout)
            .described("To receive a whole request head (408 past it)."),
        duration("read_body", &HttpConfig::read_body_timeout)
            .described("Between two reads of a request body (408 past it)."),
        duration("write", &HttpConfig::write_timeout)
            .described("Without progress while writing a response; the connection is closed past it."),
        duration("idle", &HttpConfig::idle_timeout)
            .described("A keep-alive connection without a request is closed after this."),
    }};
    return table;
}

} // namespace

const schema::Table<HttpConfig> &http()
{
    using namespace schema;
    static const Table<HttpConfig> table = Table<HttpConfig>{
        {
            address("address", &HttpConfig::address)
                .described("Where the HTTP server listens: `host:port`; `:8080` is every interface; port 0 "
                           "takes a free port (logged)."),
            integer("io_threads", &HttpConfig::io_threads,
                    "a number of event loops from 0 (one per two CPUs) to 1024", 0, 1024)
                .described("Ferry's own: event loops, one thread each; 0: half the usable CPUs rounded up, "
                           "at least 2 when two or more workers are pinned (`pool.cpu_affinity`)."),
            choice("accept", &HttpConfig::accept, parse_accept, accept_word, accept_mode,
                   "\"handoff\" or \"reuseport\"")
                .described("Ferry's own: `handoff` (one listener, each connection to the loop with the "
                           "fewest) or `reuseport` (one `SO_REUSEPORT` listener per loop)."),
            size("max_request_size", &HttpConfig::max_request_size,
                 "a positive number of megabytes, or a size such as \"10MB\"")
                .described(
                    "The largest request body (RoadRunner's key, in megabytes when bare); larger: 413."),
            integer("internal_error_code", &HttpConfig::internal_error_code,
                    "an HTTP status code from 400 to 599", 400, 599)
                .described("The status sent when a worker answers with an error frame."),
            boolean("raw_body", &HttpConfig::raw_body)
                .described("RoadRunner's: urlencoded and multipart bodies reach PHP unparsed."),
            list("trusted_subnets", &HttpConfig::trusted_subnets, "a list of subnets such as \"10.0.0.0/8\"")
                .checked(subnets)
                .described("Proxies whose `X-Forwarded-For`, `X-Real-Ip`, `Forwarded` and "
                           "`X-Forwarded-Proto` are "
                           "believed (what RoadRunner's `proxy_ip_parser` middleware does)."),
            group("uploads", uploads()).described("Uploaded files and large bodies."),
            group("limits", limits())
                .described("Ferry's own: what one request and all connections together may make the "
                           "server hold."),
            group("timeouts", timeouts()).described("Ferry's own: the client side's timeouts."),
            group("http2", http2()).described("HTTP/2 (docs/http2.md)."),
            list("middleware", &HttpConfig::middleware, "a list of middleware names such as \"static\"")
                .warned(middleware_names, true)
                .described(
                    "`static` (files from `http.static.dir` before PHP), `sendfile` (a worker's "
                    "`X-Sendfile` header answered from the file) and `gzip` (PHP responses compressed, "
                    "gzip or brotli: `compression`); `proxy_ip_parser` is accepted (see "
                    "`trusted_subnets`); other RoadRunner middleware and unknown names are warned and "
                    "ignored (errors with `--strict`)."),
            boolean("access_logs", &HttpConfig::access_logs)
                .described("One log line per request (logger `http.access`, info level)."),
            section("static", &HttpConfig::static_files, static_files())
                .described("Static files, served before PHP when `middleware` lists `static`."),
            section("compression", &HttpConfig::compression, compression())
                .described("Ferry's own: how `gzip` in `middleware` compresses PHP responses "
                           "(docs/compression.md)."),
            section("ssl", &HttpConfig::ssl, ssl())
                .described("TLS on its own address (docs/tls.md); present, `cert` and `key` are required."),
            section("pool", &HttpConfig::pool, pool()).described("The HTTP workers."),
        },
        {"headers", "gzip", "fcgi", "http3", "new_relic", "cache"},
        [](HttpConfig &h) {
            if (h.io_threads == 0) { // h.pool is resolved already (num_workers: 0 is a count): sections first
                const unsigned cpus = usable_cpus();
                h.io_threads = default_io_threads(cpus, pinned_http_workers(h.pool, cpus));
            }
            h.static_files.enabled =
                std::find(h.middleware.begin(), h.middleware.end(), "static") != h.middleware.end();
            h.sendfile =
                std::find(h.middleware.begin(), h.middleware.end(), "sendfile") != h.middleware.end();
            h.compression.enabled =
                std::find(h.middleware.begin(), h.middleware.end(), "gzip") != h.middleware.end();
        },
    };
    return table;
}

} // namespace ferry::conf::keys
