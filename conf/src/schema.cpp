// The schema machinery: the walk that reads a YAML tree through the key tables (each kind's parsing and
// messages, missing keys, unknown and unsupported keys with "did you mean"). The dump is in dump.cpp.
#include "schema.hpp"

#include "ferry/base/text.hpp"
#include "loader.hpp"
#include "values.hpp"

#include <algorithm>
#include <map>
#include <stdexcept>

namespace ferry::conf {

namespace {

using detail::describe;
using detail::Document;
using schema::IfMissing;
using schema::Key;
using schema::Kind;
using schema::Section;
using schema::Value;

// The closest known or unsupported key name, when close enough to be a typo; "" otherwise.
std::string_view closest(const Section &section, std::string_view key)
{
    std::string_view best;
    std::size_t best_distance = 3;
    const auto consider = [&](std::string_view candidate) {
        const std::size_t d = schema::detail::edit_distance(key, candidate);
        // A tie goes to the name as long as the typo (two letters swapped: "cerst" is "certs", not "cert").
        const bool closer =
            d < best_distance || (d == best_distance && !best.empty() && candidate.size() == key.size() &&
                                  best.size() != key.size());
        if (closer && d < candidate.size()) {
            best = candidate;
            best_distance = d;
        }
    };
    for (const Key &k : section.keys) {
        consider(k.name);
    }
    for (std::string_view u : section.unsupported) {
        consider(u);
    }
    return best;
}

// RFC 9110 token: a header field name.
bool is_token(std::string_view s)
{
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
               std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    });
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

// ---- reading -------------------------------------------------------------------------------------
// Every step returns the first config error it finds, which ends the walk; warnings go to the document.

class Walk {
public:
    explicit Walk(Document &doc) : doc_(doc) {}

    // `node` is the section's map, or nullptr when the key is absent; `absent` names the absent sections
    // from the last one present down to this one (for the example in a "missing" message).
    Result<> section(const YAML::Node *node, const std::string &path, const Section &section, void *object,
                     std::vector<std::string_view> absent);

private:
    Result<> key(const YAML::Node &node, const std::string &path, const Key &key, void *object);
    Result<> missing(const YAML::Node *section_node, const std::string &section_path, const Key &key,
                     void *object, const std::vector<std::string_view> &absent);
    Result<> unknown(const Section &section, const YAML::Node &key_node, const std::string &path,
                     const std::string &full);

    // `shown` is how messages show the scalar, for a check.
    Result<Value> scalar(const YAML::Node &node, const std::string &path, const Key &key, std::string &shown);
    Result<Value> list(const YAML::Node &node, const std::string &path, const Key &key);
    // Kind::env or Kind::headers: a map of names to strings.
    Result<Value> env(const YAML::Node &node, const std::string &path, Kind kind);

    Error reject(const YAML::Node &node, const std::string &path, const Document::Text &t, const Key &key,
                 const detail::Rejection &r) const
    {
        const std::string_view expected = r.expected.empty() ? key.expected : r.expected;
        if (r.why == detail::Rejection::Why::out_of_range) {
            return doc_.out_of_range(node, path, t, expected);
        }
        return doc_.invalid(node, path, t, expected, r.reason);
    }

    Document &doc_;
};

Result<Value> Walk::scalar(const YAML::Node &node, const std::string &path, const Key &key,
                           std::string &shown)
{
    Result<Document::Text> text = doc_.text(node, path, key.expected);
    if (!text) {
        return text.error();
    }
    const Document::Text &t = *text;
    shown = t.shown;
    switch (key.kind) {
    case Kind::boolean:
        if (const std::optional<bool> b = schema::yaml_bool(t.value)) {
            return Value(*b);
        }
        return doc_.invalid(node, path, t, key.expected);
    case Kind::integer: {
        const detail::Parsed<std::uint64_t> n = detail::parse_uint(t.value);
        if (!n) {
            return reject(node, path, t, key, n.error());
        }
        if (*n < key.min || *n > key.max) {
            return doc_.out_of_range(node, path, t, key.expected);
        }
        return Value(*n);
    }
    case Kind::size: {
        const detail::Parsed<std::uint64_t> bytes = detail::parse_size(t.value, schema::size_bare_unit);
        if (!bytes) {
            return reject(node, path, t, key, bytes.error());
        }
        if (*bytes < key.min) {
            return doc_.out_of_range(node, path, t, key.expected);
        }
        return Value(*bytes);
    }
    case Kind::duration: {
        const Result<Duration> d = parse_duration(t.value);
        if (!d) {
            return doc_.invalid(node, path, t, key.expected, d.error().message);
        }
        if (!t.value.empty() && t.value.find_first_not_of("0123456789") == std::string::npos &&
            t.value.find_first_not_of('0') != std::string::npos) {
            // RoadRunner (Go) reads a bare number as nanoseconds; Ferry as seconds: say which it took.
            doc_.warn(node.Mark(), path,
                      path + " " + t.shown + " has no unit: taken as " + t.value +
                          "s (RoadRunner would read nanoseconds); write \"" + t.value + "s\" or \"" +
                          t.value + "ms\"");
        }
        return Value(*d);
    }
    case Kind::address: {
        detail::Parsed<Address> a = detail::parse_address(t.value);
        if (!a) {
            return reject(node, path, t, key, a.error());
        }
        return Value(std::move(*a));
    }
    case Kind::string:
        return Value(t.value);
    case Kind::list:
    case Kind::env:
    case Kind::headers:
    case Kind::section:
    case Kind::sections:
        break;
    }
    throw std::logic_error("schema: kind of " + path + " is not a scalar");
}

Result<Value> Walk::list(const YAML::Node &node, const std::string &path, const Key &key)
{
    std::vector<std::string> items;
    if (node.IsSequence()) {
        if (node.size() < key.min) {
            return doc_.error(node, path,
                              (node.size() == 0 ? std::string("an empty list")
                                                : "a list of " + std::to_string(node.size())) +
                                  " is not a valid value (expected " + std::string(key.expected) + ")");
        }
        for (std::size_t i = 0; i < node.size(); ++i) {
            Result<Document::Text> item =
                doc_.text(node[i], path + "[" + std::to_string(i) + "]", "a string");
            if (!item) {
                return item.error();
            }
            items.push_back(std::move(item->value));
        }
        return Value(std::move(items));
    }
    Result<Document::Text> t = doc_.text(node, path, key.expected);
    if (!t) {
        return t.error();
    }
    items = detail::split_words(t->value);
    if (items.size() < key.min) {
        return doc_.invalid(node, path, *t, key.expected);
    }
    return Value(std::move(items));
}

Result<Value> Walk::env(const YAML::Node &node, const std::string &path, Kind kind)
{
    const bool headers = kind == Kind::headers;
    const std::string_view expected = headers ? schema::headers_expected : schema::env_expected;
    const char *what = headers ? "header" : "environment variable";
    schema::EnvVars vars;
    // Each name's place in `vars` (headers: lower-cased), so that a map of many names reads in n log n (a
    // search of `vars` per name took 70 s for the 290,000 names of a 4 MiB file).
    std::map<std::string, std::size_t, std::less<>> places;
    if (node.IsNull()) {
        return Value(std::move(vars));
    }
    // RoadRunner's reference config writes server.env as a list of one-entry maps ("- KEY: value"): read
    // alike.
    bool listed = !headers && node.IsSequence() && node.size() > 0;
    for (std::size_t i = 0; listed && i < node.size(); ++i) {
        listed = node[i].IsMap();
    }
    if (!node.IsMap() && !listed) {
        return doc_.error(node, path,
                          describe(node) + " is not valid here (expected " + std::string(expected) + ")");
    }
    auto add = [&](const YAML::Node &key_node, const YAML::Node &value_node) -> Result<> {
        if (!key_node.IsScalar()) {
            return doc_.error(key_node, path,
                              describe(key_node) + " is not a valid " + what + " name (expected a string)");
        }
        if (Result<> named = doc_.key_utf8(key_node, path, std::string("the ") + what + " name"); !named) {
            return named.error();
        }
        const std::string key = detail::join(path, key_node.Scalar());
        doc_.remember_key(key, key_node.Mark());
        const std::string name = headers ? key_node.Scalar() : upper(key_node.Scalar());
        if (headers && !is_token(name)) {
            return doc_.error(
                key_node, key,
                quote(key_node.Scalar()) +
                    " is not a valid header name (expected letters, digits and !#$%&'*+-.^_`|~)");
        }
        if (name.empty() || name.find_first_of("=\0", 0, 2) != std::string::npos) {
            return doc_.error(key_node, key,
                              quote(key_node.Scalar()) + " is not a valid variable name (expected no \"=\")");
        }
        std::string value;
        if (!value_node.IsNull()) {
            Result<Document::Text> t = doc_.text(value_node, key, "a string");
            if (!t) {
                return t.error();
            }
            value = std::move(t->value);
        }
        if (headers && value.find_first_of("\r\n\0", 0, 3) != std::string::npos) {
            return doc_.error(value_node, key,
                              quote(value) + " is not a valid header value (expected no CR, LF or NUL)");
        }
        std::string folded = name;
        if (headers) {
            for (char &c : folded) {
                c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
            }
        }
        const auto [place, added] = places.try_emplace(std::move(folded), vars.size());
        if (!added) {
            doc_.warn(key_node.Mark(), key,
                      std::string(what) + " " + quote(name) + " is set twice; the last one wins");
            vars[place->second].second = std::move(value);
        } else {
            vars.emplace_back(name, std::move(value));
        }
        return {};
    };
    if (listed) {
        for (std::size_t i = 0; i < node.size(); ++i) {
            for (const auto &entry : node[i]) {
                if (Result<> r = add(entry.first, entry.second); !r) {
                    return r.error();
                }
            }
        }
    } else {
        for (const auto &entry : node) {
            if (Result<> r = add(entry.first, entry.second); !r) {
                return r.error();
            }
        }
    }
    return Value(std::move(vars));
}

// ---- reading a section ----------------------------------------------------------------------------

Result<> Walk::key(const YAML::Node &given, const std::string &path, const Key &key, void *object)
{
    YAML::Node node = given; // a handle: rebound with reset(), never assigned (that would edit the document)
    if (key.kind == Kind::section) {
        if (key.section->mark_present)
            key.section->mark_present(key.enter(object));
        return section(&node, path, *key.section, key.enter(object), {});
    }
    if (key.kind == Kind::sections) { // each item a map read by the item table
        if (!node.IsSequence() && !node.IsNull()) {
            return doc_.error(node, path,
                              describe(node) + " is not a valid value (expected " +
                                  std::string(key.expected) + ")");
        }
        key.clear_items(object);
        for (std::size_t i = 0; node.IsSequence() && i < node.size(); ++i) {
            const YAML::Node item = node[i];
            const std::string item_path = path + "[" + std::to_string(i) + "]";
            if (!item.IsMap()) {
                return doc_.error(item, item_path, describe(item) + " is not valid here (expected a map)");
            }
            if (Result<> read = section(&item, item_path, *key.section, key.add_item(object), {}); !read) {
                return read;
            }
        }
        return {};
    }
    std::string shown;
    if (key.first_of_list && node.IsSequence() && node.size() > 0) {
        const YAML::Node first = node[0];
        if (node.size() > 1) {
            doc_.warn(
                node[1].Mark(), path,
                path + " lists " + std::to_string(node.size()) + " values; Ferry uses one, the first (" +
                    (first.IsScalar() ? quote(first.Scalar()) : describe(first)) + "), and ignores the rest");
        }
        node.reset(first); // read as the scalar it stands for
    }
    Result<Value> value = key.kind == Kind::list ? list(node, path, key)
                          : key.kind == Kind::env || key.kind == Kind::headers
                              ? env(node, path, key.kind)
                              : scalar(node, path, key, shown);
    if (!value) {
        return value.error();
    }
    if (key.check != nullptr) {
        if (const std::optional<schema::Problem> problem = key.check(*value, shown)) {
            if (problem->item && node.IsSequence()) {
                return doc_.error(node[*problem->item], path + "[" + std::to_string(*problem->item) + "]",
                                  problem->message);
            }
            return doc_.error(node, path, problem->message);
        }
    }
    if (key.warning != nullptr) {
        if (const std::optional<std::string> message = key.warning(*value, shown)) {
            doc_.warn(node.Mark(), path, path + " " + *message, key.warning_strict);
        }
    }
    key.store(object, std::move(*value));
    return {};
}

Result<> Walk::missing(const YAML::Node *section_node, const std::string &section_path, const Key &key,
                       void *object, const std::vector<std::string_view> &absent)
{
    const std::string path = detail::join(section_path, key.name);
    if (key.kind == Kind::section) {
        std::vector<std::string_view> chain = absent;
        chain.push_back(key.name);
        return section(nullptr, path, *key.section, key.enter(object), std::move(chain));
    }
    // Said of the section the key belongs in; of the file itself for a top-level key.
    const YAML::Mark mark =
        section_node != nullptr && !section_path.empty() ? section_node->Mark() : YAML::Mark::null_mark();
    switch (key.if_missing) {
    case IfMissing::keep_default:
        return {};
    case IfMissing::warn: {
        doc_.warn(mark, section_path,
                  "no " + quote(path) + " key; assuming " + std::string(key.name) + ": " +
                      schema::show(key, key.fetch(object)));
        return {};
    }
    case IfMissing::fail: {
        // An example of the whole missing part: "server: {command: ...}" when "server" is missing too.
        std::string example(key.example);
        if (!absent.empty()) {
            example = std::string(key.name) + ": " + example;
            for (auto it = absent.rbegin(); it != absent.rend(); ++it) {
                example = std::string(*it) + ": {" + example + "}";
            }
        }
        return doc_.error_at(doc_.where(mark, section_path), path,
                             "missing (expected " + std::string(key.required) + ", e.g. " + example + ")");
    }
    }
    throw std::logic_error("schema: unknown IfMissing of " + path);
}

Result<> Walk::unknown(const Section &section, const YAML::Node &key_node, const std::string &path,
                       const std::string &full)
{
    const std::string &key = key_node.Scalar();
    for (const auto &[name, why] : section.refused) {
        if (name == key) {
            return doc_.error(key_node, full, std::string(why));
        }
    }
    if (std::find(section.unsupported.begin(), section.unsupported.end(), key) != section.unsupported.end()) {
        doc_.warn(key_node.Mark(), full,
                  "key " + quote(full) + " is recognised but not supported yet; ignored", true);
        return {};
    }
    std::string message = "unknown key " + quote(full) + " (ignored)";
    if (const std::string_view best = closest(section, key); !best.empty()) {
        message += "; did you mean " + quote(detail::join(path, best)) + "?";
    }
    doc_.warn(key_node.Mark(), full, message, true);
    return {};
}

Result<> Walk::section(const YAML::Node *node, const std::string &path, const Section &section, void *object,
                       std::vector<std::string_view> absent)
{
    std::vector<bool> seen(section.keys.size());
    if (node != nullptr && node->IsScalar() && !section.scalar_note.empty()) {
        doc_.warn(node->Mark(), path,
                  quote(path) + ": " + quote(node->Scalar()) + " " + std::string(section.scalar_note) +
                      "; ignored");
        node = nullptr; // the defaults
    }
    if (node != nullptr && !node->IsNull()) { // "http:" with nothing under it keeps the defaults
        if (!node->IsMap()) {
            return doc_.error(*node, path,
                              describe(*node) + " is not valid here (expected " +
                                  (path.empty() ? "a map of keys" : "a map") + ")");
        }
        std::map<std::string, int, std::less<>> lines; // key -> line
        for (const auto &entry : *node) {
            const YAML::Node &key_node = entry.first;
            if (!key_node.IsScalar()) {
                return doc_.error(key_node, path,
                                  describe(key_node) + " is not a valid key (expected a string)");
            }
            if (Result<> named = doc_.key_utf8(key_node, path, "the key"); !named) {
                return named;
            }
            const std::string &name = key_node.Scalar();
            const std::string full = detail::join(path, name);
            const auto [it, inserted] = lines.emplace(name, key_node.Mark().line + 1);
            if (!inserted) {
                return doc_.error(key_node, full,
                                  "duplicate key (first defined on line " + std::to_string(it->second) + ")");
            }
            doc_.remember_key(full, key_node.Mark());
            const auto known = std::find_if(section.keys.begin(), section.keys.end(),
                                            [&](const Key &k) { return k.name == name; });
            if (known == section.keys.end()) {
                if (Result<> ok = unknown(section, key_node, path, full); !ok) {
                    return ok;
                }
                continue;
            }
            seen[static_cast<std::size_t>(known - section.keys.begin())] = true;
            if (Result<> read = key(entry.second, full, *known, object); !read) {
                return read;
            }
        }
    }
    for (std::size_t i = 0; i < section.keys.size(); ++i) {
        if (seen[i]) {
            continue;
        }
        // A section whose presence turns something on (http.ssl) requires its keys only when present.
        if (node == nullptr && section.mark_present && section.keys[i].if_missing == IfMissing::fail) {
            continue;
        }
        if (Result<> defaulted = missing(node, path, section.keys[i], object, absent); !defaulted) {
            return defaulted;
        }
    }
    if (section.resolve) {
        section.resolve(object);
    }
    return {};
}

} // namespace

Result<> detail::read_document(Document &doc, const YAML::Node &root, const Section &section, void *object)
{
    return Walk(doc).section(&root, "", section, object, {});
}

} // namespace ferry::conf
