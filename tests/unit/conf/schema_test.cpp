// The schema machinery on its own: a small table declared here, read, validated, resolved and dumped, with
// its unknown, unsupported and missing keys reported.
#include "schema.hpp"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using ferry::conf::Address;
using ferry::conf::Duration;
using ferry::conf::EnvLookup;
namespace schema = ferry::conf::schema;

namespace {

struct Inner {
    bool verbose = false;
    std::uint64_t buffer = 4096;
    bool resolved = false; // set after reading, present or not

    friend bool operator==(const Inner &, const Inner &) = default;
};

struct Demo {
    std::string name;
    int workers = 2;
    Duration timeout = 5s;
    std::uint64_t limit = 1 << 20; // a bare number is MB, as in every size key
    std::vector<std::string> tags;
    Address listen;
    std::vector<std::pair<std::string, std::string>> vars;
    std::string mode = "fast";
    Inner inner;
    Duration grace = 1s; // in the "extra" group, filling Demo itself

    friend bool operator==(const Demo &, const Demo &) = default;
};

std::optional<schema::Problem> fast_or_slow(const schema::Value &value, const std::string &shown)
{
    const std::string &mode = std::get<std::string>(value);
    if (mode == "fast" || mode == "slow") {
        return std::nullopt;
    }
    return schema::Problem{shown + " is neither fast nor slow", {}};
}

const schema::Table<Inner> &inner_keys()
{
    using namespace schema;
    static const Table<Inner> table{
        {boolean("verbose", &Inner::verbose), size("buffer", &Inner::buffer, "a size")},
        {"legacy"},
        [](Inner &inner) { inner.resolved = true; },
    };
    return table;
}

const schema::Table<Demo> &extra_keys()
{
    static const schema::Table<Demo> table{{schema::duration("grace", &Demo::grace)}};
    return table;
}

const schema::Table<Demo> &demo_keys()
{
    using namespace schema;
    static const Table<Demo> table{
        {
            string("name", &Demo::name, "a name").required_as("a name", "\"demo\""),
            integer("workers", &Demo::workers, "an integer from 1 to 8", 1, 8),
            duration("timeout", &Demo::timeout),
            size("limit", &Demo::limit, "a number of megabytes"),
            list("tags", &Demo::tags, "a list of tags"),
            address("listen", &Demo::listen),
            env("vars", &Demo::vars),
            string("mode", &Demo::mode, "fast or slow").checked(fast_or_slow).warn_if_missing(),
            section("inner", &Demo::inner, inner_keys()),
            group("extra", extra_keys()),
        },
        {"unsupported_here"},
    };
    return table;
}

EnvLookup env_with(std::map<std::string, std::string> vars)
{
    return [vars = std::move(vars)](const std::string &name) -> std::optional<std::string> {
        const auto it = vars.find(name);
        return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
}

struct Loaded {
    Demo demo;
    std::vector<std::string> warnings;
    std::string error; // "" = loaded
};

Loaded load(const std::string &yaml, const std::vector<std::string> &overrides = {},
            const EnvLookup &env = env_with({}))
{
    Loaded out;
    auto r = schema::load(demo_keys(), out.demo, yaml, "demo.yaml", overrides, env);
    if (r) {
        out.warnings = std::move(*r);
    } else {
        out.error = r.error().message;
    }
    return out;
}

} // namespace

TEST(Schema, ReadsEveryKindIntoItsMember)
{
    const Loaded r = load("name: ${WHO}\nworkers: 8\ntimeout: 1m30s\nlimit: 2\ntags: a b\tc\n"
                          "listen: '[::1]:81'\nvars: {path: /bin}\nmode: slow\n"
                          "inner: {verbose: true, buffer: 1KB}\nextra: {grace: 250ms}\n",
                          {}, env_with({{"WHO", "me"}}));
    ASSERT_EQ(r.error, "");
    EXPECT_TRUE(r.warnings.empty()) << r.warnings.front();
    const Demo &d = r.demo;
    EXPECT_EQ(d.name, "me");
    EXPECT_EQ(d.workers, 8);
    EXPECT_EQ(d.timeout, 90s);
    EXPECT_EQ(d.limit, 2u << 20);
    EXPECT_EQ(d.tags, (std::vector<std::string>{"a", "b", "c"}));
    EXPECT_EQ(d.listen, (Address{"::1", 81}));
    EXPECT_EQ(d.vars, (std::vector<std::pair<std::string, std::string>>{{"PATH", "/bin"}}));
    EXPECT_EQ(d.mode, "slow");
    EXPECT_TRUE(d.inner.verbose);
    EXPECT_EQ(d.inner.buffer, 1024u);
    EXPECT_TRUE(d.inner.resolved);
    EXPECT_EQ(d.grace, 250ms);
}

TEST(Schema, AbsentKeysKeepTheirDefaultsAndSectionsStillResolve)
{
    const Loaded r = load("name: x\nmode: fast\n");
    ASSERT_EQ(r.error, "");
    EXPECT_TRUE(r.warnings.empty());
    Demo expected;
    expected.name = "x";
    expected.inner.resolved = true;
    EXPECT_EQ(r.demo, expected);
    // An empty section is absent too.
    EXPECT_EQ(load("name: x\nmode: fast\ninner:\nextra:\n").demo, expected);
}

TEST(Schema, ErrorsNameFileLineKeyValueAndWhatIsExpected)
{
    const std::vector<std::pair<std::string, std::string>> cases{
        {"name: x\nworkers: 9\n",
         "demo.yaml:2:10: workers: \"9\" is out of range (expected an integer from 1 to 8)"},
        {"name: x\nworkers: two\n",
         "demo.yaml:2:10: workers: \"two\" is not a valid value (expected an integer from 1 to 8)"},
        {"name: x\ninner:\n  verbose: yes please\n",
         "demo.yaml:3:12: inner.verbose: \"yes please\" is not a valid value (expected true or false)"},
        {"name: x\nlimit: 0\n",
         "demo.yaml:2:8: limit: \"0\" is out of range (expected a number of megabytes)"},
        {"name: x\nlimit: 1XB\n",
         "demo.yaml:2:8: limit: \"1XB\" is not a valid value: unknown size unit \"XB\""},
        {"name: x\ntimeout: soon\n", "demo.yaml:2:10: timeout: \"soon\" is not a valid value: "},
        {"name: x\nlisten: nowhere\n", "demo.yaml:2:9: listen: \"nowhere\" is not a valid value: no port"},
        {"name: x\nlisten: ':99999'\n",
         "demo.yaml:2:9: listen: \":99999\" is out of range (expected a port number from 0 to 65535"},
        {"name: x\nmode: medium\n", "demo.yaml:2:7: mode: \"medium\" is neither fast nor slow"},
        {"name: x\ntags: []\n", ""}, // no fewest number of items: valid
        {"name: [x]\n", "demo.yaml:1:7: name: a list is not a valid value (expected a name)"},
        {"name: x\ninner: 3\n", "demo.yaml:2:8: inner: \"3\" is not valid here (expected a map)"},
        {"name: x\nvars: [a]\n",
         "demo.yaml:2:7: vars: a list is not valid here (expected a map of NAME: value)"},
        {"workers: 3\n", "demo.yaml: name: missing (expected a name, e.g. \"demo\")"},
        {"name: x\nname: y\n", "demo.yaml:2:1: name: duplicate key (first defined on line 1)"},
    };
    for (const auto &[yaml, expected] : cases) {
        const Loaded r = load(yaml);
        if (expected.empty()) {
            EXPECT_EQ(r.error, "") << yaml;
        } else {
            EXPECT_EQ(r.error.substr(0, expected.size()), expected) << yaml;
        }
    }
}

TEST(Schema, MissingRequiredKeyInAnAbsentSectionShowsTheWholePath)
{
    struct Leaf {
        std::string id;
    };
    struct Root {
        Leaf leaf;
    };
    static const schema::Table<Leaf> leaf{
        {schema::string("id", &Leaf::id, "an id").required_as("an id", "7")}};
    static const schema::Table<Root> root{{schema::section("leaf", &Root::leaf, leaf)}};
    Root value;
    auto absent = schema::load(root, value, "{}", "r.yaml", {}, env_with({}));
    ASSERT_FALSE(absent);
    EXPECT_EQ(absent.error().message, "r.yaml: leaf.id: missing (expected an id, e.g. leaf: {id: 7})");
    auto present = schema::load(root, value, "leaf:\n  other: 1\n", "r.yaml", {}, env_with({}));
    ASSERT_FALSE(present);
    EXPECT_EQ(present.error().message, "r.yaml:2:3: leaf.id: missing (expected an id, e.g. 7)");
}

TEST(Schema, UnknownUnsupportedAndMissingKeysWarn)
{
    const Loaded r =
        load("name: x\nworkrs: 3\ninner:\n  legacy: 1\n  verbos: true\nunsupported_here: 1\nzzz: 1\n");
    ASSERT_EQ(r.error, "");
    const std::vector<std::string> expected{
        "demo.yaml:2:1: unknown key \"workrs\" (ignored); did you mean \"workers\"?",
        "demo.yaml:4:3: key \"inner.legacy\" is recognised but not supported yet; ignored",
        "demo.yaml:5:3: unknown key \"inner.verbos\" (ignored); did you mean \"inner.verbose\"?",
        "demo.yaml:6:1: key \"unsupported_here\" is recognised but not supported yet; ignored",
        "demo.yaml:7:1: unknown key \"zzz\" (ignored)",
        "demo.yaml: no \"mode\" key; assuming mode: \"fast\"",
    };
    EXPECT_EQ(r.warnings, expected);
    EXPECT_EQ(r.demo.workers, 2); // the misspelt key is ignored
}

TEST(Schema, OverridesSetKeysAndAreNamedInMessages)
{
    const Loaded r = load("name: x\nmode: fast\n", {"inner.verbose=true", "workers=4", "tags=[a, 'b c']"});
    ASSERT_EQ(r.error, "");
    EXPECT_TRUE(r.demo.inner.verbose);
    EXPECT_EQ(r.demo.workers, 4);
    EXPECT_EQ(r.demo.tags, (std::vector<std::string>{"a", "b c"}));
    EXPECT_EQ(load("name: x\n", {"workers=0"}).error,
              "(from -o): workers: \"0\" is out of range (expected an integer from 1 to 8)");
}

TEST(Schema, DumpsInTableOrderAndLoadsBack)
{
    Demo d;
    d.name = "it's \"q\"";
    d.workers = 3;
    d.timeout = 1500ms;
    d.limit = 3 << 20;
    d.tags = {"a", ""};
    d.listen = Address{"::", 0};
    d.vars = {{"A", "1"}};
    d.inner.verbose = true;
    d.inner.resolved = true;
    const std::string text = schema::dump(demo_keys(), d, "a demo");
    EXPECT_EQ(text, "# a demo\n"
                    "name: \"it's \\\"q\\\"\"\n"
                    "workers: 3\n"
                    "timeout: 1500ms\n"
                    "limit: 3145728B\n"
                    "tags:\n  - \"a\"\n  - \"\"\n"
                    "listen: \"[::]:0\"\n"
                    "vars:\n  \"A\": \"1\"\n"
                    "mode: \"fast\"\n"
                    "inner:\n  verbose: true\n  buffer: 4096B\n"
                    "extra:\n  grace: 1s\n");
    const Loaded again = load(text);
    ASSERT_EQ(again.error, "") << text;
    EXPECT_TRUE(again.warnings.empty());
    EXPECT_EQ(again.demo, d);
}
