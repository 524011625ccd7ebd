// The configuration reference (`ferry config --reference`, docs/configuration.md): Markdown generated from
// the key tables, so that the document cannot drift from what the loader reads. Each key's values come from
// its `expected` text, its default from the struct's member initializers (read back through the key, as the
// dump does), its meaning from the key's help (keys_*.cpp); a test checks every key has one and that
// docs/configuration.md is this output.
#include "schema.hpp"

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::conf::schema {

namespace {

// Markdown table cells: a '|' ends the cell, a line break the row.
std::string cell(std::string_view text)
{
    std::string out;
    for (char c : text) {
        if (c == '|') {
            out += "\\|";
        } else if (c == '\n') {
            out += ' ';
        } else {
            out += c;
        }
    }
    return out;
}

// What a valid value is, short where the kind says it all (the long texts are explained once, above).
std::string values(const Key &key)
{
    switch (key.kind) {
    case Kind::duration:
        if (key.expected == duration_expected) {
            return "duration";
        }
        break;
    case Kind::address:
        if (key.expected == address_expected) {
            return "host:port";
        }
        break;
    case Kind::env:
        return "map NAME: value";
    case Kind::headers:
        return "map Header-Name: value";
    case Kind::section:
        return "section";
    case Kind::sections:
        return "list of maps";
    default:
        break;
    }
    return std::string(key.expected);
}

// A default as a user writes it: a size in the largest unit it is a whole number of ("1GB", "64KB").
std::string shown_default(const Key &key, const void *object)
{
    const Value value = key.fetch(object);
    if (key.kind == Kind::size) {
        std::uint64_t n = std::get<std::uint64_t>(value);
        for (const char *unit : {"B", "KB", "MB", "GB"}) {
            if (n == 0 || n % 1024 != 0 || std::string_view(unit) == "GB") {
                return std::to_string(n) + unit;
            }
            n /= 1024;
        }
    }
    return show(key, value);
}

struct Writer {
    std::string out;

    void rows(const Section &section, const void *defaults, const std::string &prefix)
    {
        for (const Key &key : section.keys) {
            const std::string path =
                prefix.empty() ? std::string(key.name) : prefix + "." + std::string(key.name);
            std::string value;
            if (key.if_missing == IfMissing::fail) {
                value = "*required*";
            } else if (key.kind == Kind::sections) {
                value = "none";
            } else if (key.kind != Kind::section) {
                value = "`" + cell(shown_default(key, defaults)) + "`";
            } else if (key.section->is_present) {
                value = "absent (off)";
            }
            out +=
                "| `" + path + "` | " + cell(values(key)) + " | " + value + " | " + cell(key.help) + " |\n";
            if (key.kind == Kind::section) {
                rows(*key.section, key.enter_const(defaults), path);
            } else if (key.kind == Kind::sections) {
                rows(*key.section, key.item_defaults(), path + "[]");
            }
        }
    }

    void unsupported(const Section &section, const std::string &prefix, std::string &list)
    {
        for (std::string_view name : section.unsupported) {
            list += (list.empty() ? "" : ", ") + std::string("`") + (prefix.empty() ? "" : prefix + ".") +
                    std::string(name) + "`";
        }
        for (const Key &key : section.keys) {
            if (key.kind == Kind::section) {
                unsupported(*key.section,
                            prefix.empty() ? std::string(key.name) : prefix + "." + std::string(key.name),
                            list);
            }
        }
    }
};

} // namespace

std::string reference(const Section &section, const void *defaults, std::string_view preamble)
{
    Writer w;
    w.out += preamble;
    std::string top_level; // the document's own keys (version), before the sections
    for (const Key &key : section.keys) {
        if (key.kind != Kind::section) {
            top_level += "| `" + std::string(key.name) + "` | " + cell(values(key)) + " | `" +
                         cell(shown_default(key, defaults)) + "` | " + cell(key.help) + " |\n";
        }
    }
    const std::string head = "| key | values | default | meaning |\n|---|---|---|---|\n";
    if (!top_level.empty()) {
        w.out += "\n## The document\n\n" + head + top_level;
    }
    for (const Key &key : section.keys) {
        if (key.kind != Kind::section) {
            continue;
        }
        w.out += "\n## " + std::string(key.name) + "\n\n";
        if (!key.help.empty()) {
            w.out += std::string(key.help) + "\n\n";
        }
        w.out += head;
        w.rows(*key.section, key.enter_const(defaults), std::string(key.name));
        std::string lacking;
        w.unsupported(*key.section, std::string(key.name), lacking);
        for (const auto &[name, why] : key.section->refused) {
            w.out += "\nRefused (a config error): `" + std::string(key.name) + "." + std::string(name) +
                     "`: " + std::string(why) + ".\n";
        }
        if (!lacking.empty()) {
            w.out +=
                "\nRecognised RoadRunner keys Ferry does not support (accepted with a warning): " + lacking +
                ".\n";
        }
    }
    std::string lacking;
    for (std::string_view name : section.unsupported) {
        lacking += (lacking.empty() ? "" : ", ") + std::string("`") + std::string(name) + "`";
    }
    if (!lacking.empty()) {
        w.out +=
            "\n## Other RoadRunner sections\n\nAccepted with a warning, not supported: " + lacking + ".\n";
    }
    return w.out;
}

} // namespace ferry::conf::schema
