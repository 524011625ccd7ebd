// The dump: a struct written back as YAML through the key tables (`ferry config`), and one value as the
// dump writes it (the reference's defaults).
#include "schema.hpp"

#include "values.hpp"

#include <stdexcept>
#include <yaml-cpp/yaml.h>

namespace ferry::conf {

namespace {

using schema::Key;
using schema::Kind;
using schema::Section;
using schema::Value;

void emit(YAML::Emitter &out, const Key &key, const Value &value)
{
    switch (key.kind) {
    case Kind::boolean:
        out << std::get<bool>(value);
        return;
    case Kind::integer:
        out << std::get<std::uint64_t>(value);
        return;
    case Kind::size:
        // A bare number would be megabytes: spell out the bytes.
        out << std::to_string(std::get<std::uint64_t>(value)) + "B";
        return;
    case Kind::duration:
        out << detail::format_duration(std::get<Duration>(value));
        return;
    case Kind::string:
        out << YAML::DoubleQuoted << std::get<std::string>(value);
        return;
    case Kind::address:
        out << YAML::DoubleQuoted << std::get<Address>(value).to_string();
        return;
    case Kind::list:
        out << YAML::BeginSeq;
        for (const std::string &item : std::get<std::vector<std::string>>(value)) {
            out << YAML::DoubleQuoted << item;
        }
        out << YAML::EndSeq;
        return;
    case Kind::env:
    case Kind::headers:
        out << YAML::BeginMap;
        for (const auto &[name, text] : std::get<schema::EnvVars>(value)) {
            out << YAML::Key << YAML::DoubleQuoted << name << YAML::Value << YAML::DoubleQuoted << text;
        }
        out << YAML::EndMap;
        return;
    case Kind::section:
    case Kind::sections:
        break;
    }
    throw std::logic_error("schema: a section has no value of its own");
}

void emit(YAML::Emitter &out, const Section &section, const void *object)
{
    out << YAML::BeginMap;
    for (const Key &key : section.keys) {
        if (key.kind == Kind::section && key.section->is_present &&
            !key.section->is_present(key.enter_const(object)))
            continue; // absent means something: not dumped
        out << YAML::Key << std::string(key.name) << YAML::Value;
        if (key.kind == Kind::section) {
            emit(out, *key.section, key.enter_const(object));
        } else if (key.kind == Kind::sections) {
            out << YAML::BeginSeq;
            for (std::size_t i = 0; i < key.item_count(object); ++i) {
                emit(out, *key.section, key.item_at(object, i));
            }
            out << YAML::EndSeq;
        } else {
            emit(out, key, key.fetch(object));
        }
    }
    out << YAML::EndMap;
}

} // namespace

std::string schema::dump(const Section &section, const void *object, std::string_view comment)
{
    YAML::Emitter out;
    out << YAML::Comment(std::string(comment));
    emit(out, section, object);
    return std::string(out.c_str()) + "\n";
}

std::string schema::show(const Key &key, const Value &value)
{
    YAML::Emitter out;
    out << YAML::Flow;
    emit(out, key, value);
    return out.c_str();
}

} // namespace ferry::conf
