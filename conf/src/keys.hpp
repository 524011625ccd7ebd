// The key tables of Ferry's configuration, one per section, each in the file of its feature:
// keys.cpp (the document: version, the sections, top-level RoadRunner keys), keys_server.cpp (server:
// the worker command and environment), keys_http.cpp (http: address, limits, timeouts, uploads) and
// keys_pool.cpp (http.pool and its supervisor), keys_static.cpp (http.static). A new key is one line in one
// of them (and its member in config.hpp).
#pragma once

#include "schema.hpp"

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>

namespace ferry::conf::keys {

// A string key's check: one of `allowed`; "" passes too where `empty_ok` (the key then says nothing, as in
// RoadRunner). The problem says "<key> is not a valid value (expected <expected>)". keys.cpp.
std::optional<schema::Problem> one_of(const schema::Value &value, const std::string &shown,
                                      std::initializer_list<std::string_view> allowed,
                                      std::string_view expected, bool empty_ok = false);

// A duration key's check: longer than 0 (watch_tick 0 would make the supervisor spin; a first-byte timeout
// of 0 would close every connection). keys.cpp.
std::optional<schema::Problem> positive_duration(const schema::Value &value, const std::string &shown);
// An address key's warning when it listens on every interface (0.0.0.0 or ::, as ":2114" does), for the
// listeners meant for the local machine (status, metrics). keys.cpp.
std::optional<std::string> every_interface(const schema::Value &value, const std::string &shown);

const schema::Table<Config> &config();                 // keys.cpp
const schema::Table<ServerConfig> &server();           // keys_server.cpp
const schema::Table<HttpConfig> &http();               // keys_http.cpp
const schema::Table<SslConfig> &ssl();                 // keys_ssl.cpp
const schema::Table<PoolConfig> &pool();               // keys_pool.cpp
const schema::Table<StaticConfig> &static_files();     // keys_static.cpp
const schema::Table<CompressionConfig> &compression(); // keys_compression.cpp
const schema::Table<RpcConfig> &rpc();                 // keys_rpc.cpp
const schema::Table<ReloadConfig> &reload();           // keys_reload.cpp
const schema::Table<WebsocketsConfig> &websockets();   // keys_websockets.cpp
const schema::Table<BrokerConfig> &broker();           // keys_broker.cpp
const schema::Table<StatusConfig> &status();           // keys_status.cpp
const schema::Table<MetricsConfig> &metrics();         // keys_metrics.cpp
const schema::Table<LogsConfig> &logs();               // keys_logs.cpp

} // namespace ferry::conf::keys
