// The .rr.yaml loader: YAML tree -> overrides -> validated Config, and dump().
#include "ferry/conf/config.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <limits>
#include <map>
#include <span>
#include <string_view>
#include <thread>
#include <unistd.h>

#include <yaml-cpp/yaml.h>

#include "values.hpp"
#include "ferry/conf/text.hpp"

namespace ferry::conf {

namespace {


constexpr std::uint64_t megabyte = 1ull << 20;

// ---- key tables --------------------------------------------------------------------------------------
// RoadRunner keys that Ferry knows about but does not implement yet: a warning, not an error.
constexpr std::string_view unsupported_top[] = {
    "rpc", "logs",    "status",   "metrics", "reload", "websockets", "broadcast",  "kv",   "jobs", "grpc",
    "tcp", "service", "temporal", "otel",    "endure", "fileserver", "centrifuge", "lock", "redis"};
constexpr std::string_view unsupported_server[] = {"on_init", "after_init", "user", "group", "relay_timeout"};
constexpr std::string_view unsupported_http[] = {
    "middleware", "static", "raw_body", "access_logs", "trusted_subnets", "headers", "gzip",
    "ssl",        "fcgi",   "http2",    "http3",       "new_relic",       "cache"};
constexpr std::string_view unsupported_uploads[] = {"forbid", "allow"};
constexpr std::string_view unsupported_supervisor[] = {"watch_tick", "ttl", "idle_ttl", "max_worker_memory"};
constexpr std::string_view unsupported_pool[] = {"max_queue_size", "reset_timeout", "stream_timeout",
                                                 "debug",          "command",       "dynamic_allocator"};

// Optimal string alignment distance (Levenshtein + adjacent transpositions), for "did you mean".
std::size_t edit_distance(std::string_view a, std::string_view b)
{
    std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
    for (std::size_t i = 0; i <= a.size(); ++i) {
        d[i][0] = i;
    }
    for (std::size_t j = 0; j <= b.size(); ++j) {
        d[0][j] = j;
    }
    for (std::size_t i = 1; i <= a.size(); ++i) {
        for (std::size_t j = 1; j <= b.size(); ++j) {
            const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
            d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
                d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
            }
        }
    }
    return d[a.size()][b.size()];
}

std::string join(const std::string &path, std::string_view key)
{
    return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string upper(std::string s)
{
    for (char &c : s) {
        if (c >= 'a' && c <= 'z') {
            c = static_cast<char>(c - 'a' + 'A');
        }
    }
    return s;
}

// A short description of a node for messages: its raw text when a scalar.
std::string describe(const YAML::Node &node)
{
    if (node.IsSequence()) {
        return "a list";
    }
    if (node.IsMap()) {
        return "a map";
    }
    if (node.IsScalar()) {
        return quote(node.Scalar());
    }
    return "an empty value";
}

struct Override {
    std::string text; // as given
    std::string path; // "http.pool.num_workers"
    std::vector<std::string> keys;
    std::string value;
};

std::vector<Override> parse_overrides(const std::vector<std::string> &overrides)
{
    std::vector<Override> out;
    for (const std::string &text : overrides) {
        const auto malformed = [&](const std::string &why) {
            return ConfigError("invalid override " + quote(text) + ": " + why +
                               " (expected -o key.path=value, e.g. -o http.pool.num_workers=4)");
        };
        const std::size_t eq = text.find('=');
        if (eq == std::string::npos) {
            throw malformed("no \"=\"");
        }
        std::string key = text.substr(0, eq);
        const std::size_t first = key.find_first_not_of(" \t");
        const std::size_t last = key.find_last_not_of(" \t");
        key = first == std::string::npos ? std::string() : key.substr(first, last - first + 1);
        if (key.empty()) {
            throw malformed("empty key");
        }
        Override o{text, key, {}, text.substr(eq + 1)};
        std::size_t start = 0;
        while (true) {
            const std::size_t dot = key.find('.', start);
            o.keys.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
            if (o.keys.back().empty()) {
                throw malformed("empty key segment in " + quote(key));
            }
            if (dot == std::string::npos) {
                break;
            }
            start = dot + 1;
        }
        out.push_back(std::move(o));
    }
    return out;
}

class Loader {
public:
    Loader(std::string name, const EnvLookup &env, std::vector<std::string> overridden)
        : name_(std::move(name)), env_(env), overridden_(std::move(overridden))
    {
    }

    // Applies the overrides to `root` (a map, or null for an empty document).
    void apply_overrides(YAML::Node &root, const std::vector<Override> &overrides) const;

    LoadResult run(const YAML::Node &root);

private:
    using Handler = std::function<void(const YAML::Node &, const std::string &)>;
    struct Key {
        std::string_view name;
        Handler read;
    };

    // A string value after ${VAR} expansion, and how to show it in messages.
    struct Text {
        std::string value;
        std::string shown;
    };

    bool from_override(const YAML::Mark &mark, const std::string &path) const
    {
        for (const std::string &o : overridden_) {
            if (path == o || path.starts_with(o + ".") || path.starts_with(o + "[")) {
                return true;
            }
            // A map created by -o to hold a new key has no position.
            if (mark.is_null() && !path.empty() && o.starts_with(path + ".")) {
                return true;
            }
        }
        return false;
    }

    std::string where(const YAML::Mark &mark, const std::string &path) const
    {
        if (from_override(mark, path)) {
            return "(from -o)";
        }
        if (mark.is_null()) {
            return name_;
        }
        return name_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
    }

    [[noreturn]] void fail(const YAML::Node &node, const std::string &path, const std::string &message) const
    {
        YAML::Mark mark = node.Mark();
        if (node.IsNull()) { // yaml-cpp puts an empty value at the next token: point at its key instead
            const auto key = key_marks_.find(path);
            if (key != key_marks_.end()) {
                mark = key->second;
            }
        }
        throw ConfigError(where(mark, path) + ": " + (path.empty() ? "" : path + ": ") + message);
    }

    [[noreturn]] void invalid(const YAML::Node &node, const std::string &path, const Text &text,
                              std::string_view expected, std::string_view reason = {}) const
    {
        fail(node, path,
             text.shown + " is not a valid value" + (reason.empty() ? "" : ": " + std::string(reason)) +
                 " (expected " + std::string(expected) + ")");
    }

    [[noreturn]] void out_of_range(const YAML::Node &node, const std::string &path, const Text &text,
                                   std::string_view expected) const
    {
        fail(node, path, text.shown + " is out of range (expected " + std::string(expected) + ")");
    }

    void warn(const YAML::Mark &mark, const std::string &path, const std::string &message)
    {
        warnings_.push_back(where(mark, path) + ": " + message);
    }

    Text text(const YAML::Node &node, const std::string &path, std::string_view expected) const;
    std::string string(const YAML::Node &node, const std::string &path, std::string_view expected) const
    {
        return text(node, path, expected).value;
    }
    std::uint64_t integer(const YAML::Node &node, const std::string &path, std::string_view expected,
                          std::uint64_t min, std::uint64_t max) const;
    Duration duration(const YAML::Node &node, const std::string &path) const;
    std::uint64_t size(const YAML::Node &node, const std::string &path, std::uint64_t bare_unit,
                       std::string_view expected) const;

    void section(const YAML::Node &node, const std::string &path, const std::vector<Key> &keys,
                 std::span<const std::string_view> unsupported);

    void read_server(const YAML::Node &node, const std::string &path);
    void read_command(const YAML::Node &node, const std::string &path);
    void read_env(const YAML::Node &node, const std::string &path);
    void read_http(const YAML::Node &node, const std::string &path);
    void read_address(const YAML::Node &node, const std::string &path);

    std::string name_;
    const EnvLookup &env_;
    std::vector<std::string> overridden_;
    std::vector<std::string> warnings_;
    std::map<std::string, YAML::Mark, std::less<>> key_marks_; // key path -> position of the key
    Config config_;
};

void Loader::apply_overrides(YAML::Node &root, const std::vector<Override> &overrides) const
{
    if (!root.IsDefined() || root.IsNull()) {
        root.reset(YAML::Node(YAML::NodeType::Map));
    }
    if (!root.IsMap()) {
        fail(root, "", describe(root) + " is not a valid document (expected a map of keys)");
    }
    for (const Override &o : overrides) {
        YAML::Node value;
        const char c = o.value.empty() ? '\0' : o.value.front();
        if (c == '[' || c == '{' || c == '"' || c == '\'') {
            try {
                value = YAML::Load(o.value);
            } catch (const YAML::Exception &e) {
                throw ConfigError("invalid override " + quote(o.text) + ": " + e.msg);
            }
        }
        if (!value.IsDefined() || value.IsNull()) {
            value = YAML::Node(o.value);
        }
        YAML::Node current;
        current.reset(root);
        std::string path;
        for (std::size_t i = 0; i + 1 < o.keys.size(); ++i) {
            path = join(path, o.keys[i]);
            YAML::Node next = current[o.keys[i]];
            if (!next.IsDefined() || next.IsNull()) {
                next = YAML::Node(YAML::NodeType::Map);
            } else if (!next.IsMap()) {
                throw ConfigError("invalid override " + quote(o.text) + ": " + quote(path) + " is " +
                                  describe(next) + " at " + where(next.Mark(), "") + ", not a map");
            }
            current.reset(next);
        }
        current[o.keys.back()] = value;
    }
}

Loader::Text Loader::text(const YAML::Node &node, const std::string &path, std::string_view expected) const
{
    if (!node.IsScalar()) {
        const std::string what = node.IsNull() ? "no value given" : describe(node) + " is not a valid value";
        fail(node, path, what + " (expected " + std::string(expected) + ")");
    }
    const std::string &raw = node.Scalar();
    Text t;
    try {
        t.value = expand_env(raw, env_);
    } catch (const std::invalid_argument &e) {
        fail(node, path, quote(raw) + ": " + e.what());
    }
    t.shown = quote(t.value);
    if (t.value != raw) {
        t.shown += " (expanded from " + quote(raw) + ")";
    }
    return t;
}

std::uint64_t Loader::integer(const YAML::Node &node, const std::string &path, std::string_view expected,
                              std::uint64_t min, std::uint64_t max) const
{
    const Text t = text(node, path, expected);
    std::uint64_t value = 0;
    try {
        value = detail::parse_uint(t.value);
    } catch (const std::out_of_range &) {
        out_of_range(node, path, t, expected);
    } catch (const std::invalid_argument &) {
        invalid(node, path, t, expected);
    }
    if (value < min || value > max) {
        out_of_range(node, path, t, expected);
    }
    return value;
}

Duration Loader::duration(const YAML::Node &node, const std::string &path) const
{
    constexpr std::string_view expected =
        "a duration such as \"60s\", \"500ms\" or \"1m30s\"; a bare number is seconds";
    const Text t = text(node, path, expected);
    try {
        return parse_duration(t.value);
    } catch (const std::invalid_argument &e) {
        invalid(node, path, t, expected, e.what());
    }
}

std::uint64_t Loader::size(const YAML::Node &node, const std::string &path, std::uint64_t bare_unit,
                           std::string_view expected) const
{
    const Text t = text(node, path, expected);
    std::uint64_t bytes = 0;
    try {
        bytes = detail::parse_size(t.value, bare_unit);
    } catch (const std::invalid_argument &e) {
        invalid(node, path, t, expected, e.what());
    }
    if (bytes == 0) {
        out_of_range(node, path, t, expected);
    }
    return bytes;
}

void Loader::section(const YAML::Node &node, const std::string &path, const std::vector<Key> &keys,
                     std::span<const std::string_view> unsupported)
{
    if (node.IsNull()) {
        return; // "http:" with nothing under it
    }
    if (!node.IsMap()) {
        fail(node, path,
             describe(node) + " is not valid here (expected " + (path.empty() ? "a map of keys" : "a map") +
                 ")");
    }
    std::map<std::string, int, std::less<>> seen; // key -> line
    for (const auto &entry : node) {
        const YAML::Node &key_node = entry.first;
        if (!key_node.IsScalar()) {
            fail(key_node, path, describe(key_node) + " is not a valid key (expected a string)");
        }
        const std::string &key = key_node.Scalar();
        const std::string full = join(path, key);
        const auto [it, inserted] = seen.emplace(key, key_node.Mark().line + 1);
        if (!inserted) {
            fail(key_node, full, "duplicate key (first defined on line " + std::to_string(it->second) + ")");
        }
        key_marks_.insert_or_assign(full, key_node.Mark());
        const auto known =
            std::find_if(keys.begin(), keys.end(), [&](const Key &k) { return k.name == key; });
        if (known != keys.end()) {
            known->read(entry.second, full);
            continue;
        }
        if (std::find(unsupported.begin(), unsupported.end(), key) != unsupported.end()) {
            warn(key_node.Mark(), full,
                 "key " + quote(full) + " is recognised but not supported yet; ignored");
            continue;
        }
        std::string message = "unknown key " + quote(full) + " (ignored)";
        std::string_view best;
        std::size_t best_distance = 3;
        const auto consider = [&](std::string_view candidate) {
            const std::size_t d = edit_distance(key, candidate);
            if (d < best_distance && d < candidate.size()) {
                best = candidate;
                best_distance = d;
            }
        };
        for (const Key &k : keys) {
            consider(k.name);
        }
        for (std::string_view u : unsupported) {
            consider(u);
        }
        if (!best.empty()) {
            message += "; did you mean " + quote(join(path, best)) + "?";
        }
        warn(key_node.Mark(), full, message);
    }
}

LoadResult Loader::run(const YAML::Node &root)
{
    bool has_version = false;
    bool has_server = false;
    section(root, "",
            {
                {"version",
                 [&](const YAML::Node &n, const std::string &p) {
                     has_version = true;
                     constexpr std::string_view expected = "\"3\" (or \"2.7\")";
                     const Text t = text(n, p, expected);
                     if (t.value != "3" && t.value != "2.7") {
                         fail(n, p,
                              t.shown + " is not a supported version (expected " + std::string(expected) +
                                  ")");
                     }
                     config_.version = t.value;
                 }},
                {"server",
                 [&](const YAML::Node &n, const std::string &p) {
                     has_server = true;
                     read_server(n, p);
                 }},
                {"http", [&](const YAML::Node &n, const std::string &p) { read_http(n, p); }},
            },
            unsupported_top);
    if (!has_version) {
        warnings_.push_back(name_ + ": no \"version\" key; assuming version: \"3\"");
    }
    if (!has_server) {
        throw ConfigError(name_ + ": server.command: missing (expected the PHP worker command, e.g. "
                                  "server: {command: \"php worker.php\"})");
    }
    if (config_.http.pool.num_workers == 0) {
        config_.http.pool.num_workers = std::max(1u, std::thread::hardware_concurrency());
    }
    return LoadResult{std::move(config_), std::move(warnings_)};
}

void Loader::read_server(const YAML::Node &node, const std::string &path)
{
    bool has_command = false;
    section(node, path,
            {
                {"command",
                 [&](const YAML::Node &n, const std::string &p) {
                     has_command = true;
                     read_command(n, p);
                 }},
                {"env", [&](const YAML::Node &n, const std::string &p) { read_env(n, p); }},
                {"relay",
                 [&](const YAML::Node &n, const std::string &p) {
                     const Text t = text(n, p, "\"pipes\"");
                     if (t.value != "pipes") {
                         fail(n, p, t.shown + " is not supported (only \"pipes\" is supported)");
                     }
                     config_.server.relay = t.value;
                 }},
            },
            unsupported_server);
    if (!has_command) {
        throw ConfigError(where(node.Mark(), path) + ": " + path +
                          ".command: missing (expected the PHP worker command, e.g. \"php worker.php\")");
    }
}

void Loader::read_command(const YAML::Node &node, const std::string &path)
{
    constexpr std::string_view expected =
        "the PHP worker command, e.g. \"php worker.php\", or a list of arguments";
    std::vector<std::string> argv;
    if (node.IsSequence()) {
        if (node.size() == 0) {
            fail(node, path, "an empty list is not a valid value (expected " + std::string(expected) + ")");
        }
        for (std::size_t i = 0; i < node.size(); ++i) {
            argv.push_back(string(node[i], path + "[" + std::to_string(i) + "]", "a string"));
        }
        if (argv.front().empty()) {
            fail(node[0], path + "[0]", "an empty program name is not a valid value (expected a program)");
        }
    } else {
        const Text t = text(node, path, expected);
        std::size_t i = 0;
        while (i < t.value.size()) {
            if (t.value[i] == ' ' || t.value[i] == '\t') {
                ++i;
                continue;
            }
            const std::size_t end = t.value.find_first_of(" \t", i);
            argv.push_back(t.value.substr(i, end == std::string::npos ? std::string::npos : end - i));
            i = end == std::string::npos ? t.value.size() : end;
        }
        if (argv.empty()) {
            invalid(node, path, t, expected);
        }
    }
    config_.server.command = std::move(argv);
}

void Loader::read_env(const YAML::Node &node, const std::string &path)
{
    if (node.IsNull()) {
        return;
    }
    if (!node.IsMap()) {
        fail(node, path, describe(node) + " is not valid here (expected a map of NAME: value)");
    }
    auto &env = config_.server.env;
    for (const auto &entry : node) {
        const YAML::Node &key_node = entry.first;
        if (!key_node.IsScalar()) {
            fail(key_node, path, describe(key_node) + " is not a valid variable name (expected a string)");
        }
        const std::string key = join(path, key_node.Scalar());
        key_marks_.insert_or_assign(key, key_node.Mark());
        const std::string name = upper(key_node.Scalar());
        if (name.empty() || name.find_first_of("=\0", 0, 2) != std::string::npos) {
            fail(key_node, key,
                 quote(key_node.Scalar()) + " is not a valid variable name (expected no \"=\")");
        }
        std::string value;
        if (!entry.second.IsNull()) {
            value = string(entry.second, key, "a string");
        }
        const auto existing =
            std::find_if(env.begin(), env.end(), [&](const auto &kv) { return kv.first == name; });
        if (existing != env.end()) {
            warn(key_node.Mark(), key,
                 "environment variable " + quote(name) + " is set twice; the last one wins");
            existing->second = std::move(value);
        } else {
            env.emplace_back(name, std::move(value));
        }
    }
}

void Loader::read_address(const YAML::Node &node, const std::string &path)
{
    constexpr std::string_view expected = "host:port, e.g. \"127.0.0.1:8080\" or \":8080\"";
    const Text t = text(node, path, expected);
    const std::size_t colon = t.value.rfind(':');
    if (colon == std::string::npos) {
        invalid(node, path, t, expected, "no port");
    }
    std::string host = t.value.substr(0, colon);
    const std::string port = t.value.substr(colon + 1);
    if (host.empty()) {
        host = "0.0.0.0";
    }
    const bool bracketed = host.size() > 2 && host.front() == '[' && host.back() == ']';
    if (!bracketed && host.find_first_of(":[] \t/") != std::string::npos) {
        invalid(node, path, t, expected, "invalid host (write IPv6 addresses in brackets: \"[::1]:8080\")");
    }
    std::uint64_t number = 0;
    try {
        number = detail::parse_uint(port);
    } catch (const std::exception &) {
        invalid(node, path, t, "a port number from 0 to 65535 after the \":\"");
    }
    if (number > 65535) {
        out_of_range(node, path, t, "a port number from 0 to 65535 after the \":\"");
    }
    config_.http.address = host + ":" + std::to_string(number);
}

void Loader::read_http(const YAML::Node &node, const std::string &path)
{
    HttpConfig &http = config_.http;
    section(
        node, path,
        {
            {"address", [&](const YAML::Node &n, const std::string &p) { read_address(n, p); }},
            {"max_request_size",
             [&](const YAML::Node &n, const std::string &p) {
                 http.max_request_size =
                     size(n, p, megabyte, "a positive number of megabytes, or a size such as \"10MB\"");
             }},
            {"internal_error_code",
             [&](const YAML::Node &n, const std::string &p) {
                 http.internal_error_code =
                     static_cast<int>(integer(n, p, "an HTTP status code from 400 to 599", 400, 599));
             }},
            {"pool",
             [&](const YAML::Node &n, const std::string &p) {
                 PoolConfig &pool = http.pool;
                 section(n, p,
                         {
                             {"num_workers",
                              [&](const YAML::Node &v, const std::string &k) {
                                  pool.num_workers =
                                      static_cast<unsigned>(integer(v, k, "a non-negative integer", 0,
                                                                    std::numeric_limits<unsigned>::max()));
                              }},
                             {"max_jobs",
                              [&](const YAML::Node &v, const std::string &k) {
                                  pool.max_jobs = integer(v, k, "a non-negative integer; 0 = unlimited", 0,
                                                          std::numeric_limits<std::uint64_t>::max());
                              }},
                             {"allocate_timeout",
                              [&](const YAML::Node &v, const std::string &k) {
                                  pool.allocate_timeout = duration(v, k);
                              }},
                             {"destroy_timeout",
                              [&](const YAML::Node &v, const std::string &k) {
                                  pool.destroy_timeout = duration(v, k);
                              }},
                             {"supervisor",
                              [&](const YAML::Node &v, const std::string &k) {
                                  section(v, k,
                                          {
                                              {"exec_ttl",
                                               [&](const YAML::Node &x, const std::string &q) {
                                                   pool.exec_ttl = duration(x, q);
                                               }},
                                              {"exec_warn",
                                               [&](const YAML::Node &x, const std::string &q) {
                                                   pool.exec_warn = duration(x, q);
                                               }},
                                          },
                                          unsupported_supervisor);
                              }},
                         },
                         unsupported_pool);
             }},
            {"uploads",
             [&](const YAML::Node &n, const std::string &p) {
                 section(n, p,
                         {
                             {"dir",
                              [&](const YAML::Node &v, const std::string &k) {
                                  http.uploads_dir = string(v, k, "a directory for temp files");
                              }},
                         },
                         unsupported_uploads);
             }},
            {"limits",
             [&](const YAML::Node &n, const std::string &p) {
                 section(n, p,
                         {
                             {"max_request_line",
                              [&](const YAML::Node &v, const std::string &k) {
                                  http.max_request_line =
                                      size(v, k, 1, "a positive number of bytes, or a size such as \"8KB\"");
                              }},
                             {"max_header_size",
                              [&](const YAML::Node &v, const std::string &k) {
                                  http.max_header_size =
                                      size(v, k, 1, "a positive number of bytes, or a size such as \"64KB\"");
                              }},
                             {"body_buffer_size",
                              [&](const YAML::Node &v, const std::string &k) {
                                  http.body_buffer_size =
                                      size(v, k, 1, "a positive number of bytes, or a size such as \"1MB\"");
                              }},
                             {"max_body_memory",
                              [&](const YAML::Node &v, const std::string &k) {
                                  http.max_body_memory = size(
                                      v, k, 1, "a positive number of bytes, or a size such as \"256MB\"");
                              }},
                             {"max_pipelined",
                              [&](const YAML::Node &v, const std::string &k) {
                                  http.max_pipelined = static_cast<unsigned>(integer(
                                      v, k, "a positive integer", 1, std::numeric_limits<unsigned>::max()));
                              }},
                         },
                         {});
             }},
            {"timeouts",
             [&](const YAML::Node &n, const std::string &p) {
                 section(n, p,
                         {
                             {"read_header",
                              [&](const YAML::Node &v, const std::string &k) {
                                  http.read_header_timeout = duration(v, k);
                              }},
                             {"read_body",
                              [&](const YAML::Node &v, const std::string &k) {
                                  http.read_body_timeout = duration(v, k);
                              }},
                             {"write", [&](const YAML::Node &v,
                                           const std::string &k) { http.write_timeout = duration(v, k); }},
                             {"idle", [&](const YAML::Node &v,
                                          const std::string &k) { http.idle_timeout = duration(v, k); }},
                         },
                         {});
             }},
        },
        unsupported_http);
}

} // namespace

EnvLookup process_env()
{
    return [](const std::string &name) -> std::optional<std::string> {
        const char *value = std::getenv(name.c_str());
        if (value == nullptr) {
            return std::nullopt;
        }
        return std::string(value);
    };
}

LoadResult load_string(const std::string &yaml, const std::string &name,
                       const std::vector<std::string> &overrides, const EnvLookup &env)
{
    const std::vector<Override> parsed = parse_overrides(overrides);
    std::vector<std::string> overridden;
    for (const Override &o : parsed) {
        overridden.push_back(o.path);
    }
    YAML::Node root;
    try {
        root = YAML::Load(yaml);
    } catch (const YAML::ParserException &e) {
        throw ConfigError(name + ":" + std::to_string(e.mark.line + 1) + ":" +
                          std::to_string(e.mark.column + 1) + ": YAML syntax error: " + e.msg);
    }
    try {
        Loader loader(name, env, std::move(overridden));
        if (!parsed.empty()) {
            loader.apply_overrides(root, parsed);
        }
        LoadResult result = loader.run(root);
        result.config.source = name;
        return result;
    } catch (const YAML::Exception &e) {
        throw ConfigError(name + ": " + e.what());
    }
}

LoadResult load_file(const std::string &path, const std::vector<std::string> &overrides, const EnvLookup &env)
{
    const auto cannot_read = [&](int error) {
        return ConfigError(path + ": cannot read the configuration file: " + std::strerror(error));
    };
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        throw cannot_read(errno);
    }
    std::string content;
    char buffer[16384];
    while (true) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            const int error = errno;
            ::close(fd);
            throw cannot_read(error);
        }
        if (n == 0) {
            break;
        }
        content.append(buffer, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return load_string(content, path, overrides, env);
}

std::string dump(const Config &config)
{
    YAML::Emitter out;
    out << YAML::Comment("Ferry effective configuration: sizes in bytes, durations as Go strings");
    out << YAML::BeginMap;
    out << YAML::Key << "version" << YAML::Value << YAML::DoubleQuoted << config.version;

    out << YAML::Key << "server" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "command" << YAML::Value << YAML::BeginSeq;
    for (const std::string &arg : config.server.command) {
        out << YAML::DoubleQuoted << arg;
    }
    out << YAML::EndSeq;
    out << YAML::Key << "env" << YAML::Value << YAML::BeginMap;
    for (const auto &[key, value] : config.server.env) {
        out << YAML::Key << YAML::DoubleQuoted << key << YAML::Value << YAML::DoubleQuoted << value;
    }
    out << YAML::EndMap;
    out << YAML::Key << "relay" << YAML::Value << YAML::DoubleQuoted << config.server.relay;
    out << YAML::EndMap;

    const HttpConfig &http = config.http;
    out << YAML::Key << "http" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "address" << YAML::Value << YAML::DoubleQuoted << http.address;
    // A bare number would be megabytes here (as in RoadRunner): spell out the unit.
    out << YAML::Key << "max_request_size" << YAML::Value << std::to_string(http.max_request_size) + "B";
    out << YAML::Key << "internal_error_code" << YAML::Value << http.internal_error_code;
    out << YAML::Key << "uploads" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "dir" << YAML::Value << YAML::DoubleQuoted << http.uploads_dir;
    out << YAML::EndMap;
    out << YAML::Key << "limits" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "max_request_line" << YAML::Value << http.max_request_line;
    out << YAML::Key << "max_header_size" << YAML::Value << http.max_header_size;
    out << YAML::Key << "body_buffer_size" << YAML::Value << http.body_buffer_size;
    out << YAML::Key << "max_body_memory" << YAML::Value << http.max_body_memory;
    out << YAML::Key << "max_pipelined" << YAML::Value << http.max_pipelined;
    out << YAML::EndMap;
    out << YAML::Key << "timeouts" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "read_header" << YAML::Value << detail::format_duration(http.read_header_timeout);
    out << YAML::Key << "read_body" << YAML::Value << detail::format_duration(http.read_body_timeout);
    out << YAML::Key << "write" << YAML::Value << detail::format_duration(http.write_timeout);
    out << YAML::Key << "idle" << YAML::Value << detail::format_duration(http.idle_timeout);
    out << YAML::EndMap;
    out << YAML::Key << "pool" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "num_workers" << YAML::Value << http.pool.num_workers;
    out << YAML::Key << "max_jobs" << YAML::Value << http.pool.max_jobs;
    out << YAML::Key << "allocate_timeout" << YAML::Value
        << detail::format_duration(http.pool.allocate_timeout);
    out << YAML::Key << "destroy_timeout" << YAML::Value
        << detail::format_duration(http.pool.destroy_timeout);
    out << YAML::Key << "supervisor" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "exec_ttl" << YAML::Value << detail::format_duration(http.pool.exec_ttl);
    out << YAML::Key << "exec_warn" << YAML::Value << detail::format_duration(http.pool.exec_warn);
    out << YAML::EndMap;
    out << YAML::EndMap;
    out << YAML::EndMap;

    out << YAML::EndMap;
    return std::string(out.c_str()) + "\n";
}

} // namespace ferry::conf
