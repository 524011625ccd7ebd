// The configuration schema: every key is declared once, in the table of its section, with the member it
// fills. A table drives reading and validating its section, what a missing key means, the warnings for
// unknown keys (with "did you mean") and for RoadRunner keys Ferry does not support yet, the values resolved
// after reading, and the dump (`ferry config`). The defaults are the member initializers of the structs the
// tables fill. The walk over the YAML tree and the dump are in schema.cpp, the YAML document (marks, ${VAR},
// -o) in loader.cpp, the tables of Ferry's sections in keys_*.cpp. No yaml-cpp here.
//
// A table for a struct S, e.g. in a test:
//     const Table<S> &s_keys()
//     {
//         static const Table<S> table{{integer("workers", &S::workers, "a positive integer", 1),
//                                      duration("timeout", &S::timeout),
//                                      section("limits", &S::limits, limits_keys())},
//                                     {"a_roadrunner_key_we_lack"}};
//         return table;
//     }
//     S s;
//     Result<std::vector<std::string>> warnings = schema::load(s_keys(), s, yaml, "file.yaml", {}, env);
#pragma once

#include "ferry/base/result.hpp"
#include "ferry/conf/config.hpp"

#include <algorithm>
#include <concepts>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace ferry::conf::schema {

enum class Kind {
    boolean,  // true or false
    integer,  // a decimal number within [min, max]
    size,     // "64KB", "1MB", "512B"; a bare number is megabytes (size_bare_unit) in every size key
    duration, // "60s", "500ms", "1m30s"; a bare number is seconds
    string,   // any text
    list,     // a list of strings, or one string split on blanks; at least `min` items
    env,      // a map NAME: value of environment variables, names upper-cased
    headers,  // a map Name: value of HTTP header fields, names as written (tokens), values without CR/LF/NUL
    address,  // host:port
    section,  // a nested map with its own table
    sections, // a list of maps, each read by the item table into an element of a std::vector
};

using EnvVars = std::vector<std::pair<std::string, std::string>>;
// A value once read, whatever the member it fills. Every string in it has its ${VAR} expanded.
using Value =
    std::variant<bool, std::uint64_t, Duration, std::string, std::vector<std::string>, EnvVars, Address>;

enum class IfMissing {
    keep_default, // the member keeps its initializer
    warn,         // a warning names the key and the default assumed
    fail,         // a config error: the key is required
};

// What a check found wrong: the message after "key.path: ", and for a list the item it is about.
struct Problem {
    std::string message;
    std::optional<std::size_t> item;
};
// A check beyond the kind's own (e.g. one of a few strings). `shown` is the value as messages show it (a
// scalar: quoted, with what it was expanded from). nullopt: valid.
using Check = std::optional<Problem> (*)(const Value &value, const std::string &shown);
// A valid value worth a warning (e.g. a listener on every interface): what follows the key path in it,
// `<where>: <key.path> <message>`. nullopt: nothing to say.
using Warning = std::optional<std::string> (*)(const Value &value, const std::string &shown);

// What a bare number means in a size key, any of them: megabytes, as in RoadRunner's max_request_size
// (http.uploads.max_file_size: 1 is 1 MB like http.max_request_size: 1). A size is dumped as "<n>B".
inline constexpr std::uint64_t size_bare_unit = 1ull << 20;

inline constexpr std::string_view duration_expected =
    "a duration such as \"60s\", \"500ms\" or \"1m30s\"; a bare number is seconds";
inline constexpr std::string_view address_expected = "host:port, e.g. \"127.0.0.1:8080\" or \":8080\"";
inline constexpr std::string_view env_expected = "a map of NAME: value";
inline constexpr std::string_view headers_expected = "a map of Header-Name: value";

struct Section;

// One key. The factories below fill it; the walk only reads it.
struct Key {
    std::string_view name;
    Kind kind = Kind::string;
    std::string_view expected;      // what a valid value is: "... (expected <this>)"
    std::uint64_t min = 0, max = 0; // integer: the bounds; size: the least; list: the fewest items
    IfMissing if_missing = IfMissing::keep_default;
    std::string_view required; // IfMissing::fail: what is missing, e.g. "the PHP worker command"
    std::string_view example;  // IfMissing::fail: a value to show, e.g. "\"php worker.php\""
    std::string_view help;     // what the key does, for the reference (`ferry config --reference`)
    bool first_of_list =
        false; // a scalar key RoadRunner also takes as a list: its first item (warned past one)
    Check check = nullptr;
    Warning warning = nullptr;
    bool warning_strict = false;                 // --strict makes the warning an error
    const Section *section = nullptr;            // Kind::section: the nested keys
    std::function<void(void *, Value &&)> store; // sets the member in the object the table fills
    std::function<Value(const void *)> fetch;    // reads it back, for the dump
    std::function<void *(void *)> enter;         // Kind::section: the object the nested table fills
    std::function<const void *(const void *)> enter_const;
    // Kind::sections (`section` is the item table): empty the list, add a default item (the object the item
    // table fills), count and read the items, an item with its defaults (for the reference).
    std::function<void(void *)> clear_items;
    std::function<void *(void *)> add_item;
    std::function<std::size_t(const void *)> item_count;
    std::function<const void *(const void *, std::size_t)> item_at;
    std::function<const void *()> item_defaults;
};

struct Section {
    std::vector<Key> keys;                     // in dump order
    std::vector<std::string_view> unsupported; // RoadRunner keys Ferry lacks: a warning, not an error
    // RoadRunner keys whose absence of support would change security (http.ssl: plain HTTP where the file
    // asks for TLS): a config error saying why, never ignored.
    std::vector<std::pair<std::string_view, std::string_view>> refused;
    std::function<void(void *)> resolve; // after reading (present or not): derived values
    // A section whose presence means something (reload: turns the watcher on): marks it present when the key
    // is there, even empty; the dump leaves it out when it is not.
    std::function<void(void *)> mark_present;
    std::function<bool(const void *)> is_present;
    // A section RoadRunner writes as a scalar (websockets.broker: default): a scalar there is warned about
    // with this note and the defaults kept ("" = a scalar is an error, as anywhere else).
    std::string_view scalar_note;
};

// A key of a table for struct S (the type keeps a key from landing in another struct's table).
template <typename S> struct Field : Key {
    Field required_as(std::string_view what, std::string_view example_value) &&
    {
        if_missing = IfMissing::fail;
        required = what;
        example = example_value;
        return std::move(*this);
    }
    Field warn_if_missing() &&
    {
        if_missing = IfMissing::warn;
        return std::move(*this);
    }
    Field checked(Check c) &&
    {
        check = c;
        return std::move(*this);
    }
    // `strict`: a warning that `--strict` makes an error (what the file asks for is ignored).
    Field warned(Warning w, bool strict = false) &&
    {
        warning = w;
        warning_strict = strict;
        return std::move(*this);
    }
    // A scalar key that RoadRunner also reads as a list (logs.output): Ferry takes the first item; more are
    // warned and ignored.
    Field first_of_a_list() &&
    {
        first_of_list = true;
        return std::move(*this);
    }
    // What the key does, one or two sentences of Markdown for docs/configuration.md.
    Field described(std::string_view text) &&
    {
        help = text;
        return std::move(*this);
    }
};

// The keys of a section filling struct S, the RoadRunner keys it lacks, and what it resolves after reading.
template <typename S> class Table {
public:
    // `present`: a member set to true when the section's key is in the document (see Section).
    Table(std::initializer_list<Field<S>> keys, std::initializer_list<std::string_view> unsupported = {},
          void (*resolve)(S &) = nullptr, bool S::*present = nullptr)
    {
        section_.keys.assign(keys.begin(), keys.end());
        section_.unsupported.assign(unsupported.begin(), unsupported.end());
        if (resolve != nullptr) {
            section_.resolve = [resolve](void *object) { resolve(*static_cast<S *>(object)); };
        }
        if (present != nullptr) {
            section_.mark_present = [present](void *object) { static_cast<S *>(object)->*present = true; };
            section_.is_present = [present](const void *object) {
                return static_cast<const S *>(object)->*present;
            };
        }
    }
    const Section &section() const { return section_; }
    // A RoadRunner key refused while unsupported (see Section::refused), with why and what to do instead.
    Table refusing(std::string_view key, std::string_view why) &&
    {
        section_.refused.emplace_back(key, why);
        return std::move(*this);
    }
    // RoadRunner's scalar form of this section (see Section::scalar_note): warned with `note`, ignored.
    Table taking_scalar(std::string_view note) &&
    {
        section_.scalar_note = note;
        return std::move(*this);
    }

private:
    Section section_;
};

// A boolean as the YAML 1.1 spellings this schema reads: true/True/TRUE, false/False/FALSE; else nullopt.
std::optional<bool> yaml_bool(std::string_view text);

namespace detail {
// Optimal string alignment distance (Levenshtein + adjacent transpositions), for "did you mean".
std::size_t edit_distance(std::string_view a, std::string_view b);

// A key of `kind` whose member (of type M) holds a Value alternative V.
template <typename V, typename S, typename M>
Field<S> member_key(std::string_view name, Kind kind, M S::*member)
{
    Field<S> f;
    f.name = name;
    f.kind = kind;
    f.store = [member](void *object, Value &&value) {
        static_cast<S *>(object)->*member = static_cast<M>(std::get<V>(std::move(value)));
    };
    f.fetch = [member](const void *object) -> Value {
        return static_cast<V>(static_cast<const S *>(object)->*member);
    };
    return f;
}

// member_key() for a member of the Value alternative's own type, with what a valid value is.
template <typename M, typename S>
Field<S> plain_key(std::string_view name, Kind kind, M S::*member, std::string_view expected)
{
    Field<S> f = member_key<M>(name, kind, member);
    f.expected = expected;
    return f;
}
} // namespace detail

template <typename S> Field<S> boolean(std::string_view name, bool S::*member)
{
    return detail::plain_key(name, Kind::boolean, member, "true or false");
}

// Bounds beyond what T holds are clamped to it.
template <typename S, std::integral T>
Field<S> integer(std::string_view name, T S::*member, std::string_view expected, std::uint64_t min = 0,
                 std::uint64_t max = std::numeric_limits<std::uint64_t>::max())
{
    Field<S> f = detail::member_key<std::uint64_t>(name, Kind::integer, member);
    f.expected = expected;
    f.min = min;
    f.max = std::min<std::uint64_t>(max, static_cast<std::uint64_t>(std::numeric_limits<T>::max()));
    return f;
}

template <typename S>
Field<S> size(std::string_view name, std::uint64_t S::*member, std::string_view expected,
              std::uint64_t min = 1)
{
    Field<S> f = detail::plain_key(name, Kind::size, member, expected);
    f.min = min;
    return f;
}

template <typename S>
Field<S> duration(std::string_view name, Duration S::*member, std::string_view expected = duration_expected)
{
    return detail::plain_key(name, Kind::duration, member, expected);
}

template <typename S>
Field<S> string(std::string_view name, std::string S::*member, std::string_view expected)
{
    return detail::plain_key(name, Kind::string, member, expected);
}

// A key whose value is one of a few words (`check` accepts them, its message says which), held as the enum
// E: `parse` turns a word that passed the check into E, `word` gives the one the dump writes back.
template <typename S, typename E>
Field<S> choice(std::string_view name, E S::*member, E (*parse)(std::string_view),
                std::string_view (*word)(E), Check check, std::string_view expected)
{
    Field<S> f;
    f.name = name;
    f.kind = Kind::string;
    f.expected = expected;
    f.check = check;
    f.store = [member, parse](void *object, Value &&value) {
        static_cast<S *>(object)->*member = parse(std::get<std::string>(value));
    };
    f.fetch = [member, word](const void *object) -> Value {
        return std::string(word(static_cast<const S *>(object)->*member));
    };
    return f;
}

template <typename S>
Field<S> list(std::string_view name, std::vector<std::string> S::*member, std::string_view expected,
              std::uint64_t min_items = 0)
{
    Field<S> f = detail::plain_key(name, Kind::list, member, expected);
    f.min = min_items;
    return f;
}

template <typename S> Field<S> env(std::string_view name, EnvVars S::*member)
{
    return detail::plain_key(name, Kind::env, member, env_expected);
}

template <typename S> Field<S> headers(std::string_view name, EnvVars S::*member)
{
    return detail::plain_key(name, Kind::headers, member, headers_expected);
}

template <typename S>
Field<S> address(std::string_view name, Address S::*member, std::string_view expected = address_expected)
{
    return detail::plain_key(name, Kind::address, member, expected);
}

// A nested map whose keys fill the member `member` (a struct C).
template <typename S, typename C> Field<S> section(std::string_view name, C S::*member, const Table<C> &table)
{
    Field<S> f;
    f.name = name;
    f.kind = Kind::section;
    f.section = &table.section();
    f.enter = [member](void *object) -> void * { return &(static_cast<S *>(object)->*member); };
    f.enter_const = [member](const void *object) -> const void * {
        return &(static_cast<const S *>(object)->*member);
    };
    return f;
}

// A list of maps, each filling an element of the member `member` (a std::vector<C>) through `table`; absent:
// the member's default (no item).
template <typename S, typename C>
Field<S> sections(std::string_view name, std::vector<C> S::*member, const Table<C> &table,
                  std::string_view expected)
{
    Field<S> f;
    f.name = name;
    f.kind = Kind::sections;
    f.expected = expected;
    f.section = &table.section();
    f.clear_items = [member](void *object) { (static_cast<S *>(object)->*member).clear(); };
    f.add_item = [member](void *object) -> void * {
        return &(static_cast<S *>(object)->*member).emplace_back();
    };
    f.item_count = [member](const void *object) { return (static_cast<const S *>(object)->*member).size(); };
    f.item_at = [member](const void *object, std::size_t i) -> const void * {
        return &(static_cast<const S *>(object)->*member)[i];
    };
    f.item_defaults = []() -> const void * {
        static const C defaults{};
        return &defaults;
    };
    return f;
}

// A nested map whose keys fill the same struct as its parent (http.limits fills HttpConfig).
template <typename S> Field<S> group(std::string_view name, const Table<S> &table)
{
    Field<S> f;
    f.name = name;
    f.kind = Kind::section;
    f.section = &table.section();
    f.enter = [](void *object) { return object; };
    f.enter_const = [](const void *object) { return object; };
    return f;
}

// Reads the YAML text `yaml` (called `name` in messages) into `object` following `section`, after applying
// the -o `overrides` ("key.path=value"), ${VAR} expanded through `env`: the warnings, or the config error
// (loader.cpp).
// `strict`, when given, receives the warnings that `--strict` makes errors: unknown keys and RoadRunner keys
// Ferry recognises without supporting them.
Result<std::vector<std::string>> load(const Section &section, void *object, const std::string &yaml,
                                      const std::string &name, const std::vector<std::string> &overrides,
                                      const EnvLookup &env, std::vector<std::string> *strict = nullptr);
// `object` as YAML, keys in table order, after a comment line (schema.cpp).
std::string dump(const Section &section, const void *object, std::string_view comment);
// One value as YAML on one line, as the dump writes it ("60s", ["index.html"], "php") (schema.cpp).
std::string show(const Key &key, const Value &value);
// Every key of `section` as Markdown tables, one per top-level section: path, values, default (from
// `defaults`, an object of the section's struct as constructed) and help; then the RoadRunner keys each
// section accepts without supporting them (reference.cpp).
std::string reference(const Section &section, const void *defaults, std::string_view preamble);

template <typename S>
Result<std::vector<std::string>> load(const Table<S> &table, S &object, const std::string &yaml,
                                      const std::string &name, const std::vector<std::string> &overrides,
                                      const EnvLookup &env, std::vector<std::string> *strict = nullptr)
{
    return load(table.section(), &object, yaml, name, overrides, env, strict);
}

template <typename S> std::string dump(const Table<S> &table, const S &object, std::string_view comment)
{
    return dump(table.section(), &object, comment);
}

} // namespace ferry::conf::schema
