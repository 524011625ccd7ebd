// The server's worker pools by name — RoadRunner's plugin names, "http" and "websockets" when that section is
// there — in the order they start: what control (reset), RPC (resetter, informer), status (/health, /ready)
// and metrics iterate over, so that a pool added later is one more entry, not one more parameter.
#pragma once

#include "ferry/pool/pool.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace ferry::server::detail {

struct NamedPool {
    std::string name; // the plugin, the config section ("http" → http.pool) and the metrics label
    pool::Pool *pool;
};

class Pools {
public:
    void add(std::string name, pool::Pool &p) { list_.push_back({std::move(name), &p}); }
    // The pool named `name`, or nullptr.
    pool::Pool *find(std::string_view name) const
    {
        for (const auto &e : list_)
            if (e.name == name)
                return e.pool;
        return nullptr;
    }
    const std::vector<NamedPool> &all() const { return list_; }
    // "http, websockets": for messages naming what there is.
    std::string names(std::string_view separator = ", ") const
    {
        std::string out;
        for (const auto &e : list_)
            out += (out.empty() ? "" : std::string(separator)) + e.name;
        return out;
    }

private:
    std::vector<NamedPool> list_;
};

} // namespace ferry::server::detail
