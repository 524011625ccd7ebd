// Ferry's key tables (conf/src/keys*.cpp) as a whole, key by key: every key is dumped, its default dumps and
// loads back to the same config, a value of the wrong type names the key and its line, a misspelt key gets a
// "did you mean" naming it. A key added to a table is covered here without a new test.
#include "conf_test_util.hpp"
#include "keys.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

using namespace conf_test;
namespace schema = ferry::conf::schema;

namespace {

struct Leaf {
    std::vector<std::string> path; // "http", "pool", "num_workers"
    schema::Kind kind;
    std::string dotted() const
    {
        std::string out;
        for (const std::string &segment : path) {
            out += (out.empty() ? "" : ".") + segment;
        }
        return out;
    }
};

void collect(const schema::Section &section, std::vector<std::string> prefix, std::vector<Leaf> &out)
{
    for (const schema::Key &key : section.keys) {
        std::vector<std::string> path = prefix;
        path.emplace_back(key.name);
        if (key.kind == schema::Kind::section) {
            collect(*key.section, path, out);
        } else {
            out.push_back(Leaf{std::move(path), key.kind});
        }
    }
}

// Every key that holds a value, in table (and dump) order.
std::vector<Leaf> leaves()
{
    std::vector<Leaf> out;
    collect(ferry::conf::keys::config().section(), {}, out);
    return out;
}

// A document setting `path` to `value` (on the path's last line, `path.size()`), nested as the path says.
std::string nested(const std::vector<std::string> &path, const std::string &value)
{
    std::string yaml;
    for (std::size_t i = 0; i < path.size(); ++i) {
        yaml += std::string(2 * i, ' ') + path[i] + ":" + (i + 1 == path.size() ? " " + value : "") + "\n";
    }
    return yaml;
}

// server.command comes from -o unless it is the key under test, so that the document has nothing else.
// The required keys (server.command; http.ssl's cert and key, which also turn TLS on) as overrides, but for
// `leaf` itself.
std::vector<std::string> command_unless(const Leaf &leaf)
{
    std::vector<std::string> out;
    for (const char *o : {"server.command=php worker.php", "http.ssl.cert=s.crt", "http.ssl.key=s.key"}) {
        const std::string key(o, std::string_view(o).find('='));
        if (!leaf.dotted().starts_with(key)) {
            out.emplace_back(o);
        }
    }
    return out;
}

} // namespace

using ferry::conf::Fork;

TEST(ConfKeys, TheTablesHoldEveryKeyFerryHasRead)
{
    // The keys read before the tables existed, in dump order; a new key may come anywhere among them.
    const std::vector<Leaf> all = leaves();
    std::vector<std::string> names;
    for (const Leaf &leaf : all) {
        names.push_back(leaf.dotted());
    }
    const std::vector<std::string> expected{
        "version",
        "server.command",
        "server.env",
        "server.relay",
        "http.address",
        "http.max_request_size",
        "http.internal_error_code",
        "http.uploads.dir",
        "http.limits.max_request_line",
        "http.limits.max_header_size",
        "http.limits.body_buffer_size",
        "http.limits.max_body_memory",
        "http.limits.max_pipelined",
        "http.timeouts.read_header",
        "http.timeouts.read_body",
        "http.timeouts.write",
        "http.timeouts.idle",
        "http.pool.num_workers",
        "http.pool.max_jobs",
        "http.pool.allocate_timeout",
        "http.pool.destroy_timeout",
        "http.pool.supervisor.exec_ttl",
        "http.pool.supervisor.client_gone_ttl",
        "http.pool.supervisor.exec_warn",
        "http.pool.supervisor.watch_tick",
        "http.pool.supervisor.ttl",
        "http.pool.supervisor.idle_ttl",
        "http.pool.supervisor.max_worker_memory",
    };
    auto next = names.begin();
    for (const std::string &key : expected) {
        next = std::find(next, names.end(), key);
        ASSERT_NE(next, names.end()) << key << " is missing or out of order";
    }
}

TEST(ConfKeys, EveryKeyIsDumpedInTableOrder)
{
    // reload:, websockets:, status:, logs:, metrics: and http.ssl are dumped only when present (their
    // presence turns the feature on, or RoadRunner's defaults for logs).
    const std::string text =
        ferry::conf::dump(load(minimal + "reload: {}\nwebsockets: {}\nstatus: {}\nlogs: {}\nmetrics: {}\n",
                               {"http.ssl.cert=s.crt", "http.ssl.key=s.key"})
                              .config);
    std::istringstream lines(text);
    std::string line;
    std::vector<std::string> at; // the sections the current line is in
    std::vector<std::string> dumped;
    while (std::getline(lines, line)) {
        const std::size_t indent = line.find_first_not_of(' ');
        const std::size_t colon = line.find(':');
        if (line.starts_with("#") || indent == std::string::npos || colon == std::string::npos ||
            line[indent] == '-' || line[indent] == '"' || indent % 2 != 0 || indent / 2 > at.size()) {
            continue; // the comment, a list item, an env variable
        }
        at.resize(indent / 2);
        at.push_back(line.substr(indent, colon - indent));
        dumped.push_back(Leaf{at, schema::Kind::string}.dotted());
    }
    for (const Leaf &leaf : leaves()) {
        const auto it = std::find(dumped.begin(), dumped.end(), leaf.dotted());
        EXPECT_NE(it, dumped.end()) << leaf.dotted() << " not in\n" << text;
        dumped.erase(dumped.begin(), it == dumped.end() ? it : it + 1); // and after the previous key
    }
}

TEST(ConfKeys, DefaultsDumpAndLoadBackToTheSameConfig)
{
    // Every key at its default (num_workers resolved), apart from the one required key.
    const LoadResult defaults = load("server:\n  command: php worker.php\n");
    Config expected;
    expected.version = "3";
    expected.source = ".rr.yaml";
    expected.server.command = {"php", "worker.php"};
    expected.http.pool.num_workers = cpus();
    expected.http.io_threads =
        ferry::conf::default_io_threads(cpus(), ferry::conf::pinned_http_workers(expected.http.pool, cpus()));
    expected.http.pool.max_recycling = std::max(1u, cpus() / 4);
    expected.websockets.pool.num_workers =
        cpus(); // resolved like http.pool's, used when the section is there
    expected.websockets.pool.max_recycling = std::max(1u, cpus() / 4);
    expected.logs.level = "info"; // no logs: section: Ferry's defaults, resolved
    expected.logs.encoding = "console";
    EXPECT_EQ(defaults.config, expected);

    const std::string text = ferry::conf::dump(defaults.config);
    const auto again = ferry::conf::load_string(text, ".rr.yaml", {}, fake_env());
    ASSERT_TRUE(again) << again.error().message << "\n" << text;
    EXPECT_TRUE(again->warnings.empty()) << again->warnings.front();
    EXPECT_EQ(again->config, defaults.config) << text;
    EXPECT_EQ(ferry::conf::dump(again->config), text);
}

TEST(ConfKeys, WrongTypeNamesKeyAndLine)
{
    for (const Leaf &leaf : leaves()) {
        // A map is no valid value of any kind but env and headers, which take a map and refuse a list.
        const bool is_env = leaf.kind == schema::Kind::env || leaf.kind == schema::Kind::headers;
        const std::string value = is_env ? "[x]" : "{x: 1}";
        const std::string yaml = nested(leaf.path, value);
        const std::string e = error_of(yaml, command_unless(leaf));
        const std::string line = ".rr.yaml:" + std::to_string(leaf.path.size()) + ":";
        EXPECT_TRUE(e.starts_with(line)) << e << "\nfor:\n" << yaml;
        const std::string what = is_env ? "a list is not valid here" : "a map is not a valid value";
        EXPECT_TRUE(contains(e, leaf.dotted() + ": " + what)) << e << "\nfor:\n" << yaml;
        EXPECT_TRUE(contains(e, "(expected ")) << e;
    }
}

TEST(ConfKeys, MisspeltKeyWarnsWithTheRightSuggestion)
{
    for (const Leaf &leaf : leaves()) {
        std::vector<std::string> typo = leaf.path;
        std::string &name = typo.back();
        std::size_t i = name.size() - 2; // the last two different letters swapped: "num_workesr", "addrses"
        while (name[i] == name[i + 1]) {
            --i;
        }
        std::swap(name[i], name[i + 1]);
        // Every required key, the misspelt one's too (a misspelt key is not the key).
        std::vector<std::string> overrides = {"server.command=php worker.php", "http.ssl.cert=s.crt",
                                              "http.ssl.key=s.key"};
        const LoadResult r = load(nested(typo, "1"), overrides);
        const std::string unknown = Leaf{typo, leaf.kind}.dotted();
        std::string warning;
        for (const std::string &w : r.warnings) {
            if (contains(w, "unknown key \"" + unknown + "\"")) {
                warning = w;
            }
        }
        EXPECT_TRUE(warning.starts_with(".rr.yaml:" + std::to_string(leaf.path.size()) + ":")) << warning;
        EXPECT_TRUE(contains(warning, "did you mean \"" + leaf.dotted() + "\"?"))
            << unknown << ": " << warning;
    }
}

TEST(ConfKeys, EverySizeKeyReadsABareNumberAsMegabytes)
{
    // One rule for every size key, RoadRunner's for max_request_size: a bare number is megabytes, a unit
    // says otherwise. http.uploads.max_file_size: 1 was one byte, http.limits.max_header_size: 8192 8 KB.
    using Member = std::uint64_t (*)(const Config &);
    const std::vector<std::pair<std::string, Member>> sizes{
        {"http.max_request_size", [](const Config &c) { return c.http.max_request_size; }},
        {"http.uploads.max_file_size", [](const Config &c) { return c.http.uploads_max_file_size; }},
        {"http.limits.max_request_line", [](const Config &c) { return c.http.max_request_line; }},
        {"http.limits.max_header_size", [](const Config &c) { return c.http.max_header_size; }},
        {"http.limits.body_buffer_size", [](const Config &c) { return c.http.body_buffer_size; }},
        {"http.limits.max_body_memory", [](const Config &c) { return c.http.max_body_memory; }},
        {"http.limits.max_head_memory", [](const Config &c) { return c.http.max_head_memory; }},
        {"http.limits.max_form_size", [](const Config &c) { return c.http.max_form_size; }},
        {"http.limits.min_body_rate", [](const Config &c) { return c.http.min_body_rate; }},
        {"http.static.compress_cache", [](const Config &c) { return c.http.static_files.compress_cache; }},
        {"websockets.max_assembly_memory", [](const Config &c) { return c.websockets.max_assembly_memory; }},
        {"websockets.max_send_queue_memory",
         [](const Config &c) { return c.websockets.max_send_queue_memory; }},
        {"http.pool.supervisor.max_worker_memory",
         [](const Config &c) { return c.http.pool.max_worker_memory; }},
        {"websockets.max_message_size", [](const Config &c) { return c.websockets.max_message_size; }},
        {"websockets.max_queue_bytes", [](const Config &c) { return c.websockets.max_queue_bytes; }},
        {"websockets.pool.supervisor.max_worker_memory",
         [](const Config &c) { return c.websockets.pool.max_worker_memory; }},
    };
    std::vector<std::string> size_leaves;
    for (const Leaf &leaf : leaves()) {
        if (leaf.kind == schema::Kind::size) {
            size_leaves.push_back(leaf.dotted());
        }
    }
    std::vector<std::string> listed;
    for (const auto &[key, member] : sizes) {
        listed.push_back(key);
    }
    std::sort(listed.begin(), listed.end());
    std::sort(size_leaves.begin(), size_leaves.end());
    EXPECT_EQ(listed, size_leaves) << "a size key added or moved: list it here";
    for (const auto &[key, member] : sizes) {
        std::vector<std::string> path;
        for (std::size_t start = 0, dot = 0; dot != std::string::npos; start = dot + 1) {
            dot = key.find('.', start);
            path.push_back(key.substr(start, dot == std::string::npos ? dot : dot - start));
        }
        const Leaf leaf{path, schema::Kind::size};
        for (const auto &[value, bytes] :
             std::vector<std::pair<std::string, std::uint64_t>>{{"1", 1ull << 20},
                                                                {"3", 3ull << 20},
                                                                {"3MB", 3ull << 20},
                                                                {"3M", 3ull << 20},
                                                                {"3KB", 3ull << 10},
                                                                {"3k", 3ull << 10},
                                                                {"1GB", 1ull << 30},
                                                                {"1G", 1ull << 30},
                                                                {"512B", 512},
                                                                {"\"2 MB\"", 2ull << 20}}) {
            const LoadResult r = load(nested(path, value), command_unless(leaf));
            EXPECT_EQ(member(r.config), bytes) << key << ": " << value;
            // The dump spells out the bytes, so that it loads back to the same.
            EXPECT_TRUE(
                contains(ferry::conf::dump(r.config), path.back() + ": " + std::to_string(bytes) + "B\n"))
                << key << ": " << value;
        }
    }
}

TEST(ConfKeys, NumWorkersIsResolvedOnceInConf)
{
    // 0, absent, from -o: the config holds the number of CPUs, and so does the dump.
    for (const LoadResult &r : {load(minimal), load(minimal + "http:\n  pool:\n    num_workers: 0\n"),
                                load(minimal, {"http.pool.num_workers=0"})}) {
        EXPECT_EQ(r.config.http.pool.num_workers, cpus());
        EXPECT_TRUE(contains(ferry::conf::dump(r.config), "num_workers: " + std::to_string(cpus()) + "\n"));
    }
    EXPECT_EQ(load(minimal, {"http.pool.num_workers=1"}).config.http.pool.num_workers, 1u);
}

TEST(ConfKeys, IoThreadsDefaultToHalfTheUsableCpus)
{
    EXPECT_EQ(ferry::conf::default_io_threads(1), 1u);
    EXPECT_EQ(ferry::conf::default_io_threads(2), 1u);
    EXPECT_EQ(ferry::conf::default_io_threads(3), 2u);
    EXPECT_EQ(ferry::conf::default_io_threads(16), 8u);
    // At least two when two or more workers are pinned: a loop beside each.
    EXPECT_EQ(ferry::conf::default_io_threads(2, 2), 2u);
    EXPECT_EQ(ferry::conf::default_io_threads(2, 1), 1u); // one pinned worker: a second loop would have none
    EXPECT_EQ(ferry::conf::default_io_threads(1, 0), 1u);
    EXPECT_EQ(ferry::conf::default_io_threads(4, 4), 2u);
    EXPECT_EQ(ferry::conf::default_io_threads(16, 16), 8u);
    // Which workers are pinned: the pool's rule (resolve_cpu_affinity).
    ferry::conf::PoolConfig pool;
    pool.num_workers = 2;
    EXPECT_EQ(ferry::conf::pinned_http_workers(pool, 2), 2u);
    EXPECT_EQ(ferry::conf::pinned_http_workers(pool, 1), 0u); // one usable CPU
    pool.num_workers = 3;
    EXPECT_EQ(ferry::conf::pinned_http_workers(pool, 2), 0u); // more workers than CPUs
    pool.num_workers = 2;
    pool.cpu_affinity = ferry::conf::CpuAffinity::off;
    EXPECT_EQ(ferry::conf::pinned_http_workers(pool, 2), 0u);
    pool.cpu_affinity = ferry::conf::CpuAffinity::automatic;
    pool.debug = true;
    EXPECT_EQ(ferry::conf::pinned_http_workers(pool, 2), 0u);

    // Through load(): num_workers: 0 counts the CPUs, as io_threads does.
    const unsigned want = ferry::conf::default_io_threads(cpus(), cpus() >= 2 ? cpus() : 0);
    for (const LoadResult &r :
         {load(minimal), load(minimal + "http:\n  io_threads: 0\n"), load(minimal, {"http.io_threads=0"})}) {
        EXPECT_EQ(r.config.http.io_threads, want);
        EXPECT_TRUE(contains(ferry::conf::dump(r.config), "io_threads: " + std::to_string(want) + "\n"));
    }
    const auto workers = [](unsigned n, const std::string &more = "") {
        return load(minimal + "http:\n  pool:\n    num_workers: " + std::to_string(n) + "\n" + more)
            .config.http.io_threads;
    };
    const unsigned half = ferry::conf::default_io_threads(cpus());
    EXPECT_EQ(workers(2), cpus() >= 2 ? std::max(2u, half) : half);
    EXPECT_EQ(workers(2, "    cpu_affinity: off\n"), half);
    EXPECT_EQ(workers(2, "    debug: true\n"), half);
    EXPECT_EQ(workers(cpus() + 1), half); // more workers than CPUs: not pinned
    EXPECT_EQ(load(minimal, {"http.io_threads=3"}).config.http.io_threads, 3u);
    EXPECT_EQ(load(minimal, {"http.accept=reuseport"}).config.http.accept, ferry::conf::Accept::reuseport);
    EXPECT_EQ(load(minimal).config.http.accept, ferry::conf::Accept::handoff);
}

TEST(ConfKeys, ForkFastExitDefaultsToOnInBothPools)
{
    const LoadResult d = load(minimal);
    EXPECT_TRUE(d.config.http.pool.fork_fast_exit);
    EXPECT_TRUE(d.config.websockets.pool.fork_fast_exit);
    EXPECT_TRUE(contains(ferry::conf::dump(d.config), "fork_fast_exit: true\n"))
        << ferry::conf::dump(d.config);
    const LoadResult off = load(minimal + "http:\n  pool:\n    fork: true\n    fork_fast_exit: false\n");
    EXPECT_TRUE(off.warnings.empty());
    EXPECT_EQ(off.config.http.pool.fork, Fork::app);
    EXPECT_FALSE(off.config.http.pool.fork_fast_exit);
    EXPECT_FALSE(load(minimal, {"http.pool.fork_fast_exit=false"}).config.http.pool.fork_fast_exit);
}

TEST(ConfKeys, ForkIsFalseTrueOrPhp)
{
    EXPECT_EQ(load(minimal).config.http.pool.fork, Fork::off);
    for (const auto &[word, mode] :
         {std::pair{"true", Fork::app}, {"false", Fork::off}, {"php", Fork::php}}) {
        const LoadResult r = load(minimal + "http:\n  pool:\n    fork: " + word + "\n");
        EXPECT_TRUE(r.warnings.empty()) << word;
        EXPECT_EQ(r.config.http.pool.fork, mode) << word;
        EXPECT_TRUE(contains(ferry::conf::dump(r.config), std::string("fork: \"") + word + "\"\n"))
            << "the dump writes the word back: " << ferry::conf::dump(r.config);
    }
    // YAML 1.1's other spellings of a boolean, as a boolean key takes them.
    EXPECT_EQ(load(minimal + "http:\n  pool:\n    fork: True\n").config.http.pool.fork, Fork::app);
    EXPECT_EQ(load(minimal + "http:\n  pool:\n    fork: FALSE\n").config.http.pool.fork, Fork::off);
    EXPECT_EQ(load(minimal, {"websockets.pool.fork=php"}).config.websockets.pool.fork, Fork::php);
    const std::string dump = ferry::conf::dump(load(minimal + "http:\n  pool:\n    fork: php\n").config);
    EXPECT_EQ(load(dump).config.http.pool.fork, Fork::php) << "the dump loads back: " << dump;
}

// A word key of both pools (`field`, named `key`): `auto` by default (in the dump too), each of `values`
// accepted without a warning as its enumerator, and the last one applied from the command line
// (http.pool.KEY=VALUE).
template <typename E>
static void expect_auto_pool_key(const std::string &key, E ferry::conf::PoolConfig::*field, E automatic,
                                 std::initializer_list<std::pair<const char *, E>> values)
{
    const LoadResult d = load(minimal);
    EXPECT_EQ(d.config.http.pool.*field, automatic) << key;
    EXPECT_EQ(d.config.websockets.pool.*field, automatic) << key;
    EXPECT_TRUE(contains(ferry::conf::dump(d.config), key + ": \"auto\"\n")) << ferry::conf::dump(d.config);
    for (const auto &[word, value] : values) {
        const LoadResult r = load(minimal + "http:\n  pool:\n    " + key + ": " + word + "\n");
        EXPECT_TRUE(r.warnings.empty()) << key << ": " << word;
        EXPECT_EQ(r.config.http.pool.*field, value) << word;
    }
    const auto &[word, value] = *(values.end() - 1);
    EXPECT_EQ(load(minimal, {"http.pool." + key + "=" + word}).config.http.pool.*field, value);
}

TEST(ConfKeys, CpuAffinityDefaultsToAutoInBothPools)
{
    using ferry::conf::CpuAffinity;
    expect_auto_pool_key("cpu_affinity", &ferry::conf::PoolConfig::cpu_affinity, CpuAffinity::automatic,
                         {{"auto", CpuAffinity::automatic}, {"off", CpuAffinity::off}});
}

TEST(ConfKeys, RecyclePriorityDefaultsToAutoInBothPools)
{
    using ferry::conf::RecyclePriority;
    expect_auto_pool_key("recycle_priority", &ferry::conf::PoolConfig::recycle_priority,
                         RecyclePriority::automatic,
                         {{"idle", RecyclePriority::idle},
                          {"auto", RecyclePriority::automatic},
                          {"normal", RecyclePriority::normal}});
}

// Every key and section says what it does: docs/configuration.md (`ferry config --reference`) is generated
// from these texts, and a key added without one would be a blank line of it.
TEST(Keys, EveryKeyAndSectionHasHelpForTheReference)
{
    std::vector<std::string> lacking;
    auto walk = [&](auto &self, const schema::Section &section, const std::string &prefix) -> void {
        for (const schema::Key &key : section.keys) {
            const std::string path =
                prefix.empty() ? std::string(key.name) : prefix + "." + std::string(key.name);
            if (key.help.empty()) {
                lacking.push_back(path);
            }
            if (key.kind == schema::Kind::section || key.kind == schema::Kind::sections) {
                self(self, *key.section, path);
            }
        }
    };
    walk(walk, ferry::conf::keys::config().section(), "");
    EXPECT_EQ(lacking, std::vector<std::string>{});
}

TEST(Keys, TheReferenceHasARowPerKeyWithItsDefault)
{
    const std::string md = ferry::conf::reference();
    EXPECT_NE(md.find("| `http.pool.max_jobs` | a non-negative integer; 0 = unlimited | `0` | "),
              std::string::npos);
    EXPECT_NE(md.find("| `http.max_request_size` | "), std::string::npos);
    EXPECT_NE(md.find("| `1GB` | "),
              std::string::npos); // max_request_size's default, in a unit a user writes
    EXPECT_NE(md.find("| `server.command` | "), std::string::npos);
    EXPECT_NE(md.find("*required*"), std::string::npos);
    EXPECT_NE(md.find("`server.user`"), std::string::npos); // a RoadRunner key accepted without support
    EXPECT_EQ(md.find("| `http.pool.num_workers` |  |"), std::string::npos);
}
