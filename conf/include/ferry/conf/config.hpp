// Ferry configuration: a .rr.yaml-style file turned into typed, validated structs whose values are resolved
// (an address as host and port, a worker count, never "0 = the number of CPUs"), so that nothing downstream
// re-derives them. Key names follow RoadRunner's (docs/protocol.md); each key is declared once, in the
// key table of its section (conf/src/keys_*.cpp); the defaults are the member initializers below.
#pragma once

#include "ferry/base/result.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::conf {

using Duration = std::chrono::milliseconds;

// The keys whose value is one of a few words, as the enums downstream code switches on (the words are in
// conf/src/keys_*.cpp, where each key is declared; `ferry config` writes them back).
enum class Fork {
    off, // false: each worker is a PHP started anew
    app, // true: forks of a template that booted the app; for another worker, of a PHP-level one
    php, // "php": forks of a PHP-level template (docs/protocol.md §8.1)
};
enum class RecyclePriority {
    automatic, // "auto": idle when this process may restore a worker's priority, else normal
    idle,      // "idle": and the server does not start when it cannot
    normal,    // "normal"
};
enum class CpuAffinity {
    automatic, // "auto": each worker on a CPU of its own when they fit (pins_workers())
    off,       // "off"
};
enum class Accept {
    handoff,   // one listening socket; each connection goes to the loop with the fewest
    reuseport, // a SO_REUSEPORT socket per loop; the kernel hashes
};
enum class Overflow {
    drop_oldest, // a full send queue drops its oldest non-control messages
    close,       // closes the connection with 1008
};
enum class StaticFallback {
    php,    // "php": the request goes on to PHP
    status, // "403" / "404": answered by the server
};

enum class ClientAuth { // http.ssl.client_auth_type (RoadRunner's names, Go's tls.ClientAuthType)
    none,               // "no_client_certs"
    request,            // "request_client_cert": asked for, not required, not verified
    require_any,        // "require_any_client_cert": required, not verified
    verify_if_given,    // "verify_client_cert_if_given": verified against root_ca when sent
    require_and_verify, // "require_and_verify_client_cert"
};

// A listening address: `http.address` "host:port" resolved into its parts.
struct Address {
    std::string host = "127.0.0.1"; // a name or an IP address; IPv6 without brackets; ":8080" gives "0.0.0.0"
    std::uint16_t port = 8080;      // 0 = any free port

    // "host:port", an IPv6 host in brackets: "[::1]:8080".
    std::string to_string() const;

    friend bool operator==(const Address &, const Address &) = default;
};

struct PoolConfig {
    unsigned num_workers = 0;   // the YAML's 0 is resolved by load() to the number of CPUs
    std::uint64_t max_jobs = 0; // 0 = unlimited
    // Ferry's own: false, true or "php". true: workers are forked from a template process
    // that booted the app (docs/protocol.md §8), or, for a worker that is not Ferry's library, from a
    // PHP-level template (§8.1: PHP started, no script run); php: from a PHP-level template whatever the
    // worker. Falls back to starting each worker when there can be no template (logged).
    Fork fork = Fork::off;
    // Ferry's own: a forked worker the server stopped ends with _exit(0) after PHP's request shutdown
    // (shutdown functions, destructors, output), skipping the engine's teardown (docs/protocol.md §8).
    bool fork_fast_exit = true;
    // Ferry's own: whether replacements for workers that still serve boot, and retired workers exit, under
    // SCHED_IDLE.
    RecyclePriority recycle_priority = RecyclePriority::automatic;
    // Ferry's own: auto pins each booted worker to one CPU when there are at least two usable CPUs and no
    // more workers than CPUs (both pools together).
    CpuAffinity cpu_affinity = CpuAffinity::automatic;
    Duration allocate_timeout = std::chrono::seconds(60); // a request's wait for a free worker (then 503)
    std::uint64_t max_queue_size = 0; // requests waiting for a worker beyond which a new one gets 503 at once
    Duration destroy_timeout = std::chrono::seconds(60);
    // Ferry's own: spawn + PID handshake of one worker; beyond it the boot failed.
    Duration boot_timeout = std::chrono::seconds(60);
    // A rolling reset's wait for a busy old worker: then it is killed and its request answered 503.
    Duration reset_timeout = std::chrono::seconds(60);
    // Ferry's own: workers being replaced at the same moment (rolling reset; later the supervisor); the
    // YAML's 0 (the default) is resolved to a quarter of num_workers, at least 1.
    unsigned max_recycling = 0;
    // supervisor.exec_ttl: 504 + kill beyond it (0 = off); 60 s by default, as nginx's fastcgi_read_timeout,
    // so that a hung worker is never a permanent 503. A streamed response is timed until its head.
    Duration exec_ttl = std::chrono::seconds(60);
    // supervisor.client_gone_ttl: a request whose client left (not a stream) may run this long after, then
    // its worker is killed and replaced (0 = until exec_ttl).
    Duration client_gone_ttl = std::chrono::seconds(10);
    Duration exec_warn =
        std::chrono::seconds(30); // supervisor.exec_warn: log a request running longer (0 = off)
    // supervisor.*: soft limits, checked every watch_tick; a worker past one is replaced (the replacement
    // first; a busy one finishes its request), max_recycling at a time (pool/src/supervisor.hpp).
    Duration watch_tick = std::chrono::seconds(1);
    Duration ttl{0};                    // a worker's lifetime (0 = unlimited)
    Duration idle_ttl{0};               // idle this long after its first request (0 = unlimited)
    std::uint64_t max_worker_memory{0}; // RSS in bytes (the YAML's bare number is megabytes; 0 = unlimited)
    // debug: a fresh worker for every request (development), none kept idle.
    bool debug = false;

    friend bool operator==(const PoolConfig &, const PoolConfig &) = default;
};

struct ServerConfig {
    std::vector<std::string> command;                     // argv; a string is split on spaces
    std::vector<std::pair<std::string, std::string>> env; // keys upper-cased, values expanded
    std::string relay = "pipes";

    friend bool operator==(const ServerConfig &, const ServerConfig &) = default;
};

// http.static (conf/src/keys_static.cpp; the handler is server/src/static/). RoadRunner's keys, then Ferry's.
struct StaticConfig {
    bool enabled = false;            // "static" is in http.middleware
    std::string dir = ".";           // http.static.dir: the directory served (checked at start)
    std::vector<std::string> forbid; // extensions never served (".php"): PHP gets the request
    std::vector<std::string> allow;  // when set, only these extensions are served
    bool calculate_etag = false;     // strong ETag from the content (computed once per file version)
    bool weak = false;               // ETag W/"size-mtime" even with calculate_etag
    std::vector<std::pair<std::string, std::string>>
        request; // RoadRunner adds these to the request: no effect
    std::vector<std::pair<std::string, std::string>> response; // extra response headers on every file
    // Ferry's own:
    std::vector<std::string> index{"index.html"}; // a directory's index files, first found wins
    bool precompressed = false;                   // serve foo.css.br / foo.css.gz when accepted
    // Text files (http.compression.types, min_length to 1 MiB) without a precompressed sibling, compressed
    // once per file version into a cache of compress_cache bytes (all loops together) for clients that accept
    // it.
    bool compress = false;
    std::uint64_t compress_cache = 16ull * 1024 * 1024;
    std::string cache_control;                         // Cache-Control value ("" = none)
    StaticFallback on_forbidden = StaticFallback::php; // a forbidden or not-allowed extension, a dotfile: 403
    StaticFallback on_missing = StaticFallback::php;   // no such file, a directory without index: 404
    bool follow_symlinks = false;                      // symlinks may lead outside dir (else 403)
    unsigned max_open_files = 1024; // open_file_cache: descriptors and stat results kept per event loop

    friend bool operator==(const StaticConfig &, const StaticConfig &) = default;
};

// http.ssl.certs (Ferry's own): more certificates, each for the host names a client asks for (SNI).
struct SslCert {
    std::string cert, key;
    std::vector<std::string> hosts; // "example.com", "*.example.com" (one label)

    friend bool operator==(const SslCert &, const SslCert &) = default;
};

// http.ssl (conf/src/keys_ssl.cpp; server/src/tls/): TLS on its own address; the section's presence turns it
// on.
struct SslConfig {
    bool enabled = false;
    Address address{"0.0.0.0", 443}; // RoadRunner's default ":443"
    std::string cert, key;           // PEM files: the certificate (chain) and its private key
    std::string root_ca;             // PEM file: the CAs client certificates are verified against (mTLS)
    ClientAuth client_auth = ClientAuth::none;
    bool redirect = false;      // plain HTTP on http.address answers 308 to the https URL
    std::vector<SslCert> certs; // by SNI host name; `cert`/`key` serve every other name
    // Ferry's own: the handshake's limits (nginx: client_header_timeout covers it; a cap as HAProxy's
    // maxsslconn).
    Duration handshake_timeout = std::chrono::seconds(10);
    unsigned max_handshakes =
        1024; // handshakes in progress, all loops together; past it a connection is closed

    friend bool operator==(const SslConfig &, const SslConfig &) = default;
};

// http.compression (Ferry's own; server/src/compress/): PHP responses compressed when http.middleware lists
// "gzip" (RoadRunner's name), gzip or brotli as the client's Accept-Encoding prefers.
struct CompressionConfig {
    bool enabled = false; // "gzip" in http.middleware
    // Media types compressed ("text/*" matches a whole type; parameters are not compared).
    std::vector<std::string> types{"text/html",
                                   "text/plain",
                                   "text/css",
                                   "text/javascript",
                                   "text/xml",
                                   "text/csv",
                                   "text/markdown",
                                   "application/json",
                                   "application/javascript",
                                   "application/xml",
                                   "application/xhtml+xml",
                                   "application/rss+xml",
                                   "application/atom+xml",
                                   "application/ld+json",
                                   "application/problem+json",
                                   "application/manifest+json",
                                   "image/svg+xml"};
    std::uint64_t min_length = 1024; // bytes: smaller whole bodies go as they are
    int gzip_level = 1;              // 1 (fastest) to 9; nginx's default gzip_comp_level is 1 too
    bool brotli = true;              // offer br at all
    std::string prefer = "gzip";     // on a tie of q-values: "gzip" (faster) or "br"
    int brotli_quality = 4;          // 0 to 11
    // Encoders held at once, all loops together (streamed and large bodies, static files being compressed;
    // ~270 KiB each for gzip); past it the body or file goes uncompressed.
    unsigned max_streams = 256;

    friend bool operator==(const CompressionConfig &, const CompressionConfig &) = default;
};

struct HttpConfig {
    Address address; // http.address
    // http.io_threads: event loops (threads) of the front end. The YAML's 0 (the default) is resolved by
    // load() to default_io_threads(usable_cpus(), pinned_http_workers(...)); nothing downstream sees a 0.
    unsigned io_threads = 0;
    // http.accept: how connections reach the loops.
    Accept accept = Accept::handoff;
    std::uint64_t max_request_size = 1ull << 30; // bytes (YAML value is in MB, as RoadRunner)
    int internal_error_code = 500;
    // Ferry's own limits (docs/configuration.md). Every size key reads a bare number as megabytes, as
    // max_request_size (schema::size_bare_unit); the members hold bytes.
    std::uint64_t max_request_line = 8 * 1024;    // http.limits.max_request_line (414 beyond)
    std::uint64_t max_header_size = 64 * 1024;    // http.limits.max_header_size ("64KB"; a bare number: MB)
    std::uint64_t body_buffer_size = 1024 * 1024; // http.limits.body_buffer_size: per request in memory
    std::uint64_t max_body_memory = 256ull * 1024 * 1024; // http.limits.max_body_memory: all bodies in memory
    // http.limits.max_head_memory: receive buffers past each connection's first 8 KiB (large heads, pipelined
    // requests), all connections together; past it a request gets 503 (0 = no limit).
    std::uint64_t max_head_memory = 64ull * 1024 * 1024;
    std::string uploads_dir; // http.uploads.dir: temp files ("" = $TMPDIR or /tmp)
    std::vector<std::string> uploads_forbid{".php", ".exe",
                                            ".bat"}; // http.uploads.forbid (RoadRunner's default)
    std::vector<std::string> uploads_allow;          // http.uploads.allow: only these when set
    std::uint64_t uploads_max_file_size =
        0;                       // http.uploads.max_file_size: per file, 0 = none (error 1 beyond)
    unsigned max_pipelined = 16; // http.limits.max_pipelined
    bool raw_body = false;       // http.raw_body: forms reach PHP unparsed
    // http.trusted_subnets: peers whose X-Forwarded-For & co. are believed ("10.0.0.0/8", "::1"); none
    // by default (RoadRunner trusts private ranges when its proxy_ip_parser middleware is on).
    std::vector<std::string> trusted_subnets;
    std::uint64_t max_form_size =
        8 * 1024 * 1024;             // http.limits.max_form_size: a urlencoded form (413 beyond)
    unsigned max_form_fields = 1000; // http.limits.max_form_fields (400 beyond), as max_input_vars
    unsigned max_form_depth = 64;    // http.limits.max_form_depth (400 beyond), as max_input_nesting_level
    Duration read_header_timeout = std::chrono::seconds(10); // http.timeouts.read_header
    Duration read_body_timeout = std::chrono::seconds(60);   // http.timeouts.read_body (between body reads)
    // http.limits.min_body_rate: bytes per second a request body must average once read_body has passed
    // since its first byte was awaited (a trickling client gets 408 at read_body + received / rate; 0 = off).
    std::uint64_t min_body_rate = 1024;
    Duration write_timeout = std::chrono::seconds(60); // http.timeouts.write
    Duration idle_timeout = std::chrono::seconds(75);  // http.timeouts.idle (keep-alive)
    std::vector<std::string> middleware; // http.middleware: "static" turns static files on; others are logged
    // "sendfile" in http.middleware (RoadRunner's): a PHP response with an X-Sendfile header is answered with
    // the file it names, sent by the server; PHP sees "X-Sendfile-Type: X-Sendfile" in each request.
    bool sendfile = false;
    bool access_logs = false;  // http.access_logs: a log line per request (logger "http.access")
    StaticConfig static_files; // http.static
    SslConfig ssl;             // http.ssl
    // http.http2 (RoadRunner's keys; server/src/h2/): HTTP/2 over TLS is offered by ALPN whenever http.ssl is
    // on; h2c (cleartext, by prior knowledge or Upgrade) on http.address only when asked for.
    bool h2c = false;
    unsigned max_concurrent_streams = 128;
    CompressionConfig compression; // http.compression, on with "gzip" in http.middleware
    PoolConfig pool;

    friend bool operator==(const HttpConfig &, const HttpConfig &) = default;
};

// rpc (conf/src/keys_rpc.cpp; server/src/control/): the control listener, docs/protocol.md §6.
struct RpcConfig {
    std::string listen;        // "tcp://127.0.0.1:6001" or "unix:///run/ferry.sock"; "" = none
    bool allow_remote = false; // Ferry's own: listen on an address other than loopback (warned)
    // Ferry's own: a connection that sends no byte within this is closed (idle sockets must not hold the
    // listener's 64 slots; when they are all taken, the oldest idle connection is closed for a new one).
    Duration first_byte_timeout = std::chrono::seconds(5);

    friend bool operator==(const RpcConfig &, const RpcConfig &) = default;
};

// reload (conf/src/keys_reload.cpp; pool/src/watcher.*): the file watcher that resets the workers. Present in
// the document = on. RoadRunner 2.x's `services.http.{dirs, recursive, ignore, patterns}` are merged into the
// top-level lists by load().
struct ReloadService {
    std::vector<std::string> dirs, ignore, patterns;
    bool recursive = true;

    friend bool operator==(const ReloadService &, const ReloadService &) = default;
};
struct ReloadServices {
    ReloadService http;

    friend bool operator==(const ReloadServices &, const ReloadServices &) = default;
};
struct ReloadConfig {
    bool enabled = false;                               // the `reload` key is there
    Duration interval = std::chrono::milliseconds(100); // quiet time after the last change before the reset
    // Globs relative to each dir ("**/*.php", "*.{php,twig}", "src/**"); a RoadRunner suffix (".php") means
    // "**/*.php". Empty: "**/*.php".
    std::vector<std::string> patterns;
    std::vector<std::string> dirs; // empty: "."
    bool recursive = true;
    std::vector<std::string> ignore; // directories (names or paths relative to a dir, or globs) never watched
    std::string backend =
        "auto"; // Ferry's own: "auto" (inotify, polling when unavailable), "inotify", "poll"
    Duration poll_interval = std::chrono::seconds(1); // Ferry's own: how often the polling backend looks
    ReloadServices services;                          // RoadRunner 2.x

    friend bool operator==(const ReloadConfig &, const ReloadConfig &) = default;
};

// websockets.broker (conf/src/keys_broker.cpp; server/src/broker/, docs/cluster.md): where topics are
// shared. `memory`: this process only; `redis`: every Ferry node through Redis pub/sub (Ferry's own form of
// the key RoadRunner names a broadcast broker with).
struct BrokerConfig {
    std::string driver = "memory";                            // "memory" or "redis"
    std::vector<std::string> addrs{"127.0.0.1:6379"};         // "host:port", tried in turn when one fails
    std::vector<Address> servers{Address{"127.0.0.1", 6379}}; // addrs, parsed (resolve)
    std::string prefix = "ferry:"; // channels and keys: <prefix>t:<topic>, <prefix>n:<node>
    std::string password;          // AUTH (Redis 6 ACL: "user:password" sends both)
    std::string node;              // this node's name in connection ids ("" = a random one at each start)
    Duration connect_timeout = std::chrono::seconds(2); // a connection and its first answer, within this

    bool redis() const { return driver == "redis"; }
    friend bool operator==(const BrokerConfig &, const BrokerConfig &) = default;
};

// websockets (conf/src/keys_websockets.cpp; server/src/ws/, docs/protocol.md §9): WebSockets held in the
// core, events decided by a pool of PHP workers (RR_MODE=websockets). Present in the document = on.
// RoadRunner 2.x's `path` and `allowed_origin`, then Ferry's own.
struct WebsocketsConfig {
    bool enabled = false;       // the `websockets` key is there
    std::string path = "/ws";   // the upgrade is served on this path (exact match, query allowed)
    std::string allowed_origin; // one pattern, `*` matching any run of characters; "" or "*" = any Origin
    std::uint64_t max_message_size = 16 * 1024 * 1024; // a larger message closes with 1009
    Duration ping_interval = std::chrono::seconds(30); // a ping after this long without a frame (0 = none)
    Duration idle_timeout = std::chrono::seconds(60);  // no frame at all (pongs count) for this long: closed
    // A connection's send queue, bounded in messages and bytes; beyond it `overflow` decides.
    std::uint64_t max_queue_messages = 1024;
    std::uint64_t max_queue_bytes = 4 * 1024 * 1024;
    Overflow overflow = Overflow::drop_oldest; // a full send queue: drop the oldest, or close with 1008
    // Server-wide, over every connection of every loop (0 = no limit): the buffers of client messages
    // received in part (past it the connection whose message needs more closes with 1009), and the bytes
    // waiting in send queues (past it `overflow` applies to the connection being sent to).
    std::uint64_t max_assembly_memory = 64 * 1024 * 1024;
    std::uint64_t max_send_queue_memory = 128 * 1024 * 1024;
    // A client message (all its frames) begun must end within this (0 = no limit), else 1008; control
    // frames in between do not extend it.
    Duration message_timeout = std::chrono::seconds(30);
    bool relay = false; // a client's messages are published to its topics by the core, without PHP
    // Server-sent events: the same topics over text/event-stream on this path ("" = off), authorized by the
    // same open event; the last sse_history text messages of each topic are kept for Last-Event-ID.
    std::string sse_path;
    std::uint64_t sse_history = 100;
    Duration sse_heartbeat = std::chrono::seconds(15); // a comment line after this long without an event
    PoolConfig pool;                                   // the websockets workers (RR_MODE=websockets)
    BrokerConfig broker;                               // topics across nodes (memory: this process only)

    friend bool operator==(const WebsocketsConfig &, const WebsocketsConfig &) = default;
};

// status (conf/src/keys_status.cpp; server/src/control/status.*): RoadRunner's health and readiness
// endpoints on their own listener. Present in the document = on.
struct StatusConfig {
    bool enabled = false;
    Address address{"127.0.0.1", 2114};
    int unavailable_status_code = 503; // what /health and /ready answer when the answer is no
    Duration first_byte_timeout = std::chrono::seconds(5); // Ferry's own, as rpc.first_byte_timeout

    friend bool operator==(const StatusConfig &, const StatusConfig &) = default;
};

// logs (conf/src/keys_logs.cpp; relay/src/log.cpp): RoadRunner's logger plugin (zap). Absent, Ferry logs at
// info in console encoding on stderr; present, RoadRunner's defaults apply: `mode` (development unless set)
// implies the level and the encoding, which `level` and `encoding` override. Resolved by load(): level and
// encoding are never empty, `none` is `off`.
struct LogsConfig {
    bool enabled = false;             // the `logs` key is there
    std::string mode = "development"; // development (debug, console), production (info, json), raw, off
    std::string level;                // debug, info, warn or error (warning; dpanic, panic, fatal: error)
    std::string encoding;             // console or json
    std::string output = "stderr";    // stderr, stdout or a file path (appended to; opened at start)

    friend bool operator==(const LogsConfig &, const LogsConfig &) = default;
};

// metrics (conf/src/keys_metrics.cpp; server/src/control/metrics.*): Prometheus text at GET /metrics on its
// own listener. Present in the document = on.
struct MetricsConfig {
    bool enabled = false;
    Address address{"127.0.0.1", 2112};
    Duration first_byte_timeout = std::chrono::seconds(5); // Ferry's own, as rpc.first_byte_timeout

    friend bool operator==(const MetricsConfig &, const MetricsConfig &) = default;
};

struct Config {
    std::string version = "3";
    std::string source; // file path it was loaded from ("" = defaults)
    ServerConfig server;
    HttpConfig http;
    RpcConfig rpc;
    ReloadConfig reload;
    WebsocketsConfig websockets;
    StatusConfig status;
    MetricsConfig metrics;
    LogsConfig logs;

    friend bool operator==(const Config &, const Config &) = default; // compares source too
};

struct LoadResult {
    Config config;
    std::vector<std::string> warnings; // e.g. unknown keys, with file:line and key path
    // Those of the warnings that `--strict` makes errors: unknown keys (a typo such as http.adress) and
    // RoadRunner keys Ferry recognises but does not support.
    std::vector<std::string> strict;
};

// The CPUs this process may run on (sched_getaffinity: `taskset` and cgroup cpusets count, unlike
// std::thread::hardware_concurrency()), ascending; empty when the kernel does not say.
std::vector<int> usable_cpu_list();
// How many: usable_cpu_list()'s size, else the online CPUs; at least 1.
unsigned usable_cpus();
// http.io_threads when not set: half the usable CPUs, rounded up (docs/architecture.md, "Several loops": per
// hello-world request the front end needs about as much CPU as PHP, so half the cores keep it from being the
// bottleneck while PHP has the other half), and at least two when the HTTP pool will pin two or more workers
// (`pinned_workers`, pinned_http_workers()): each loop then runs beside its own (on 2 CPUs, 1.15-1.24x of one
// loop at c64: bench/results/2026-12-05-loops-beside-workers.md).
unsigned default_io_threads(unsigned cpus, unsigned pinned_workers = 0);
// The pinning rule, one function for the pool (pool/src/placement.cpp) and for io_threads' default: a pool's
// `workers` are pinned to CPUs of their own with cpu_affinity auto, no debug, at least two usable CPUs, and
// no more workers than the `free_cpus` that the pools started before it left (all of them for the first).
bool pins_workers(CpuAffinity affinity, bool debug, unsigned workers, unsigned usable_cpus,
                  unsigned free_cpus);
// The workers the HTTP pool will pin (pins_workers() as the first pool): num_workers, or 0.
unsigned pinned_http_workers(const PoolConfig &pool, unsigned cpus);

// Looks up an environment variable; returns nullopt when unset. Default: ::getenv.
using EnvLookup = std::function<std::optional<std::string>(const std::string &)>;
EnvLookup process_env();

// The largest configuration file load_file() reads; a larger one is refused, as is anything but a regular
// file (a device such as /dev/zero, a FIFO, a directory), each with a message naming the file and why.
inline constexpr std::uint64_t max_config_file_size = 4ull << 20;

// `overrides` are "key.path=value" strings (ferry -o), applied before validation. A config error is a
// value: its message names file, line, key path, the bad value and what was expected, e.g.
// `.rr.yaml:6:18: http.pool.num_workers: "many" is not a valid value (expected a non-negative integer)`.
Result<LoadResult> load_file(const std::string &path, const std::vector<std::string> &overrides = {},
                             const EnvLookup &env = process_env());
Result<LoadResult> load_string(const std::string &yaml, const std::string &name,
                               const std::vector<std::string> &overrides = {},
                               const EnvLookup &env = process_env());

// The effective configuration as YAML (for `ferry serve --dry-run` / `ferry config`); it loads back to the
// same Config.
std::string dump(const Config &config);
// Every key as Markdown (`ferry config --reference`, docs/configuration.md): values, default, meaning.
std::string reference();

// "60s", "500ms", "1m", "1h", "1m30s", bare integer = seconds; the error says why not.
Result<Duration> parse_duration(std::string_view text);
// "${VAR}" / "${VAR:-default}" expansion; an unterminated "${" or a bad name is an error.
Result<std::string> expand_env(std::string_view text, const EnvLookup &env);

} // namespace ferry::conf
