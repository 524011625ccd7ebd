// http: the front end's address, request limits, timeouts and upload spooling (the pool is in keys_pool.cpp).
// `limits`, `timeouts` and `uploads` are Ferry's own sections apart from uploads.dir (docs/protocol.md
// lists RoadRunner's keys).
#include "ferry/conf/text.hpp"
#include "keys.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <optional>

namespace ferry::conf::keys {

namespace {

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

const schema::Table<HttpConfig> &uploads()
{
    using namespace schema;
    static const Table<HttpConfig> table{
        {
            string("dir", &HttpConfig::uploads_dir, "a directory for temp files"),
            list("forbid", &HttpConfig::uploads_forbid, "a list of file extensions such as \".php\""),
            list("allow", &HttpConfig::uploads_allow, "a list of file extensions such as \".jpg\""),
            size("max_file_size", &HttpConfig::uploads_max_file_size,
                 "a number of megabytes, or a size such as \"512KB\" (0 = no limit)", 0),
        },
    };
    return table;
}

const schema::Table<HttpConfig> &limits()
{
    using namespace schema;
    static const Table<HttpConfig> table{{
        size("max_request_line", &HttpConfig::max_request_line,
             "a positive number of megabytes, or a size such as \"8KB\""),
        size("max_header_size", &HttpConfig::max_header_size,
             "a positive number of megabytes, or a size such as \"64KB\""),
        size("body_buffer_size", &HttpConfig::body_buffer_size,
             "a positive number of megabytes, or a size such as \"1MB\""),
        size("max_head_memory", &HttpConfig::max_head_memory,
             "a number of megabytes, or a size such as \"64MB\" (0 = no limit)", 0),
        size("max_body_memory", &HttpConfig::max_body_memory,
             "a positive number of megabytes, or a size such as \"256MB\""),
        integer("max_pipelined", &HttpConfig::max_pipelined, "a positive integer", 1),
        size("max_form_size", &HttpConfig::max_form_size,
             "a positive number of megabytes, or a size such as \"8MB\""),
        integer("max_form_fields", &HttpConfig::max_form_fields, "a positive integer", 1),
        integer("max_form_depth", &HttpConfig::max_form_depth, "a positive integer", 1),
        size("min_body_rate", &HttpConfig::min_body_rate,
             "megabytes per second, or a size such as \"1KB\" per second (0 = no minimum)", 0),
    }};
    return table;
}

const schema::Table<HttpConfig> &timeouts()
{
    using namespace schema;
    static const Table<HttpConfig> table{{
        duration("read_header", &HttpConfig::read_header_timeout),
        duration("read_body", &HttpConfig::read_body_timeout),
        duration("write", &HttpConfig::write_timeout),
        duration("idle", &HttpConfig::idle_timeout),
    }};
    return table;
}

} // namespace

const schema::Table<HttpConfig> &http()
{
    using namespace schema;
    static const Table<HttpConfig> table{
        {
            address("address", &HttpConfig::address),
            integer("io_threads", &HttpConfig::io_threads,
                    "a number of event loops from 0 (one per two CPUs) to 1024", 0, 1024),
            string("accept", &HttpConfig::accept, "\"handoff\" or \"reuseport\"").checked(accept_mode),
            size("max_request_size", &HttpConfig::max_request_size,
                 "a positive number of megabytes, or a size such as \"10MB\""),
            integer("internal_error_code", &HttpConfig::internal_error_code,
                    "an HTTP status code from 400 to 599", 400, 599),
            boolean("raw_body", &HttpConfig::raw_body),
            list("trusted_subnets", &HttpConfig::trusted_subnets, "a list of subnets such as \"10.0.0.0/8\"")
                .checked(subnets),
            group("uploads", uploads()),
            group("limits", limits()),
            group("timeouts", timeouts()),
            list("middleware", &HttpConfig::middleware, "a list of middleware names such as \"static\""),
            boolean("access_logs", &HttpConfig::access_logs),
            section("static", &HttpConfig::static_files, static_files()),
            section("pool", &HttpConfig::pool, pool()),
        },
        {"headers", "gzip", "ssl", "fcgi", "http2", "http3", "new_relic", "cache"},
        [](HttpConfig &h) {
            if (h.io_threads == 0) { // h.pool is resolved already (num_workers: 0 is a count): sections first
                const unsigned cpus = usable_cpus();
                h.io_threads = default_io_threads(cpus, pinned_http_workers(h.pool, cpus));
            }
            h.static_files.enabled =
                std::find(h.middleware.begin(), h.middleware.end(), "static") != h.middleware.end();
            h.sendfile =
                std::find(h.middleware.begin(), h.middleware.end(), "sendfile") != h.middleware.end();
        },
    };
    return table;
}

} // namespace ferry::conf::keys
