// The key tables of Ferry's configuration, one per section, each in the file of its feature:
// keys.cpp (the document: version, the sections, top-level RoadRunner keys), keys_server.cpp (server:
// the worker command and environment), keys_http.cpp (http: address, limits, timeouts, uploads) and
// keys_pool.cpp (http.pool and its supervisor), keys_static.cpp (http.static). A new key is one line in one
// of them (and its member in config.hpp).
#pragma once

#include "schema.hpp"

namespace ferry::conf::keys {

const schema::Table<Config> &config();               // keys.cpp
const schema::Table<ServerConfig> &server();         // keys_server.cpp
const schema::Table<HttpConfig> &http();             // keys_http.cpp
const schema::Table<PoolConfig> &pool();             // keys_pool.cpp
const schema::Table<StaticConfig> &static_files();   // keys_static.cpp
const schema::Table<RpcConfig> &rpc();               // keys_rpc.cpp
const schema::Table<ReloadConfig> &reload();         // keys_reload.cpp
const schema::Table<WebsocketsConfig> &websockets(); // keys_websockets.cpp
const schema::Table<StatusConfig> &status();         // keys_status.cpp
const schema::Table<MetricsConfig> &metrics();       // keys_metrics.cpp
const schema::Table<LogsConfig> &logs();             // keys_logs.cpp

} // namespace ferry::conf::keys
