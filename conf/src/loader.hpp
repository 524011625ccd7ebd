// The YAML document being loaded, as the schema walk sees it: where a node is (file:line:col, or "(from -o)"
// for what an override set), its text with ${VAR} expanded, and the config errors and warnings about it in
// one format: `<where>: <key.path>: <message>`. A config error is a value (ferry::Error) that the walk
// returns up to schema::load() (loader.cpp). Private to ferry_conf (yaml-cpp).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "ferry/conf/config.hpp"

namespace ferry::conf::schema {
struct Section;
}

namespace ferry::conf::detail {

// A short description of a node for messages: its text quoted when a scalar, else "a list", "a map"...
std::string describe(const YAML::Node &node);

// "a.b" + "c" = "a.b.c"; "" + "c" = "c".
std::string join(const std::string &path, std::string_view key);

class Document {
public:
    // `overridden`: the key paths that -o set.
    Document(std::string name, const EnvLookup &env, std::vector<std::string> overridden);

    // A scalar's value after ${VAR} expansion, and how messages show it: quoted, plus what it was expanded
    // from. Not a scalar, or an invalid ${...}: a config error expecting `expected`.
    struct Text {
        std::string value;
        std::string shown;
    };
    // A value that is not UTF-8 (after expansion) is a config error too: YAML text is UTF-8, and the dump
    // (`ferry config`) would write the bad byte as U+FFFD, a different value.
    Result<Text> text(const YAML::Node &node, const std::string &path, std::string_view expected) const;
    // A key (or map name, such as an environment variable's) that is not UTF-8: a config error at `node`.
    Result<> key_utf8(const YAML::Node &node, const std::string &path, std::string_view what) const;

    // "file:line:col", "file" when the mark is null, or "(from -o)" when an override set the key.
    std::string where(const YAML::Mark &mark, const std::string &path) const;

    // The position of a key, so that an error about its empty value points at the key.
    void remember_key(const std::string &path, const YAML::Mark &mark);

    // Config errors, to return: `<where>: <path>: <message>`, where `node` is (its key's position when the
    // node is an empty value).
    Error error(const YAML::Node &node, const std::string &path, const std::string &message) const;
    Error error_at(const std::string &where, const std::string &path, const std::string &message) const;
    // `<shown> is not a valid value[: <reason>] (expected <expected>)`.
    Error invalid(const YAML::Node &node, const std::string &path, const Text &text,
                  std::string_view expected, std::string_view reason = {}) const;
    // `<shown> is out of range (expected <expected>)`.
    Error out_of_range(const YAML::Node &node, const std::string &path, const Text &text,
                       std::string_view expected) const;

    // `strict`: a warning that `--strict` makes an error (an unknown or unsupported key).
    void warn(const YAML::Mark &mark, const std::string &path, const std::string &message,
              bool strict = false);
    std::vector<std::string> take_warnings() { return std::move(warnings_); }
    std::vector<std::string> take_strict() { return std::move(strict_); }

private:
    bool from_override(const YAML::Mark &mark, const std::string &path) const;

    std::string name_;
    const EnvLookup &env_;
    std::vector<std::string> overridden_;
    std::vector<std::string> warnings_;
    std::vector<std::string> strict_;
    std::map<std::string, YAML::Mark, std::less<>> key_marks_; // key path -> position of the key
};

// Reads the document's root node into `object` following `section`: warnings go to `doc`, the first config
// error is returned (the walk, in schema.cpp).
Result<> read_document(Document &doc, const YAML::Node &root, const schema::Section &section, void *object);

} // namespace ferry::conf::detail
