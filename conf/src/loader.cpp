// Loading a YAML document: parsing, -o overrides applied to the tree, ${VAR} expansion, and positions of keys
// and values for the messages of config errors and warnings.
#include "loader.hpp"

#include "ferry/base/text.hpp"
#include "schema.hpp"

#include <utility>

namespace ferry::conf {

namespace {

bool is_name_start(char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

// Index of the '}' closing the "${" at `open`, or npos.
std::size_t closing_brace(std::string_view s, std::size_t open)
{
    int depth = 0;
    for (std::size_t j = open; j < s.size(); ++j) {
        if (s[j] == '$' && j + 1 < s.size() && s[j + 1] == '{') {
            ++depth;
            ++j;
        } else if (s[j] == '}' && --depth == 0) {
            return j;
        }
    }
    return std::string_view::npos;
}

// `"text" is not valid UTF-8 (byte 0xNN at offset N)`, the text escaped (its bad bytes as \xNN).
std::string not_utf8(std::string_view text, std::size_t at)
{
    static constexpr char hex[] = "0123456789abcdef";
    const auto c = static_cast<unsigned char>(text[at]);
    return '"' + printable(text, 200) + "\" is not valid UTF-8 (byte 0x" + hex[c >> 4] + hex[c & 15] +
           " at offset " + std::to_string(at) + ")";
}

// ---- -o key.path=value ----------------------------------------------------------------------------

struct Override {
    std::string text; // as given
    std::string path; // "http.pool.num_workers"
    std::vector<std::string> keys;
    std::string value;
};

Result<std::vector<Override>> parse_overrides(const std::vector<std::string> &overrides)
{
    std::vector<Override> out;
    for (const std::string &text : overrides) {
        const auto malformed = [&](const std::string &why) {
            return fail("invalid override " + quote(text) + ": " + why +
                        " (expected -o key.path=value, e.g. -o http.pool.num_workers=4)");
        };
        const std::size_t eq = text.find('=');
        if (eq == std::string::npos) {
            return malformed("no \"=\"");
        }
        std::string key = text.substr(0, eq);
        const std::size_t first = key.find_first_not_of(" \t");
        const std::size_t last = key.find_last_not_of(" \t");
        key = first == std::string::npos ? std::string() : key.substr(first, last - first + 1);
        if (key.empty()) {
            return malformed("empty key");
        }
        Override o{text, key, {}, text.substr(eq + 1)};
        std::size_t start = 0;
        while (true) {
            const std::size_t dot = key.find('.', start);
            o.keys.push_back(key.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
            if (o.keys.back().empty()) {
                return malformed("empty key segment in " + quote(key));
            }
            if (dot == std::string::npos) {
                break;
            }
            start = dot + 1;
        }
        out.push_back(std::move(o));
    }
    return out;
}

// Sets each override's key in `root` (a map, or null for an empty document), creating the maps on its path.
Result<> apply_overrides(const detail::Document &doc, YAML::Node &root,
                         const std::vector<Override> &overrides)
{
    if (!root.IsDefined() || root.IsNull()) {
        root.reset(YAML::Node(YAML::NodeType::Map));
    }
    if (!root.IsMap()) {
        return doc.error(root, "",
                         detail::describe(root) + " is not a valid document (expected a map of keys)");
    }
    for (const Override &o : overrides) {
        YAML::Node value;
        const char c = o.value.empty() ? '\0' : o.value.front();
        if (c == '[' || c == '{' || c == '"' || c == '\'') {
            try { // yaml-cpp reports a syntax error by throwing: it becomes a value here, where it is raised
                value = YAML::Load(o.value);
            } catch (const YAML::Exception &e) {
                return fail("invalid override " + quote(o.text) + ": " + e.msg);
            }
        }
        if (!value.IsDefined() || value.IsNull()) {
            value = YAML::Node(o.value);
        }
        YAML::Node current;
        current.reset(root);
        std::string path;
        for (std::size_t i = 0; i + 1 < o.keys.size(); ++i) {
            path = detail::join(path, o.keys[i]);
            YAML::Node next = current[o.keys[i]];
            if (!next.IsDefined() || next.IsNull()) {
                next = YAML::Node(YAML::NodeType::Map);
            } else if (!next.IsMap()) {
                return fail("invalid override " + quote(o.text) + ": " + quote(path) + " is " +
                            detail::describe(next) + " at " + doc.where(next.Mark(), "") + ", not a map");
            }
            current.reset(next);
        }
        current[o.keys.back()] = value;
    }
    return {};
}

} // namespace

// ---- ${VAR}, $VAR ---------------------------------------------------------------------------------

Result<std::string> expand_env(std::string_view s, const EnvLookup &env)
{
    std::string out;
    std::size_t i = 0;
    while (i < s.size()) {
        const std::size_t open = s.find('$', i);
        if (open == std::string_view::npos) {
            out.append(s.substr(i));
            break;
        }
        out.append(s.substr(i, open - i));
        if (open + 1 < s.size() && is_name_start(s[open + 1])) {
            // $NAME without braces, as RoadRunner (Go's os.ExpandEnv) reads it: the longest name.
            std::size_t end = open + 2;
            while (end < s.size() && (is_name_start(s[end]) || is_digit(s[end]))) {
                ++end;
            }
            if (env) {
                if (std::optional<std::string> value = env(std::string(s.substr(open + 1, end - open - 1)))) {
                    out += *value;
                }
            }
            i = end;
            continue;
        }
        if (open + 1 >= s.size() || s[open + 1] != '{') {
            out += '$'; // "$5", "$$", a final "$": left as written (Go would drop "$$" and "$1")
            i = open + 1;
            continue;
        }
        const std::size_t close = closing_brace(s, open);
        if (close == std::string_view::npos) {
            return fail("unterminated \"${\" at \"" + std::string(s.substr(open, 24)) +
                        (s.size() - open > 24 ? "...\"" : "\""));
        }
        const std::string_view inner = s.substr(open + 2, close - open - 2);
        const std::size_t sep = inner.find(":-");
        const std::string_view name = inner.substr(0, sep);
        bool valid = !name.empty() && is_name_start(name[0]);
        for (char c : name) {
            valid = valid && (is_name_start(c) || is_digit(c));
        }
        if (!valid) {
            return fail("invalid variable reference \"${" + std::string(inner) +
                        "}\" (use \"${NAME}\" or \"${NAME:-default}\")");
        }
        std::optional<std::string> value;
        if (env) {
            value = env(std::string(name));
        }
        if (sep != std::string_view::npos) {
            if (value && !value->empty()) {
                out += *value;
            } else {
                Result<std::string> fallback = expand_env(inner.substr(sep + 2), env);
                if (!fallback) {
                    return fallback;
                }
                out += *fallback;
            }
        } else if (value) {
            out += *value;
        }
        i = close + 1;
    }
    // Error is constructible from a string too: say which one this is.
    return Result<std::string>(boost::system::in_place_value, std::move(out));
}

namespace detail {

std::string describe(const YAML::Node &node)
{
    if (node.IsSequence()) {
        return "a list";
    }
    if (node.IsMap()) {
        return "a map";
    }
    if (node.IsScalar()) {
        return quote(node.Scalar());
    }
    return "an empty value";
}

std::string join(const std::string &path, std::string_view key)
{
    return path.empty() ? std::string(key) : path + "." + std::string(key);
}

// ---- the document ---------------------------------------------------------------------------------

Document::Document(std::string name, const EnvLookup &env, std::vector<std::string> overridden)
    : name_(std::move(name)), env_(env), overridden_(std::move(overridden))
{
}

bool Document::from_override(const YAML::Mark &mark, const std::string &path) const
{
    for (const std::string &o : overridden_) {
        if (path == o || path.starts_with(o + ".") || path.starts_with(o + "[")) {
            return true;
        }
        // A map created by -o to hold a new key has no position.
        if (mark.is_null() && !path.empty() && o.starts_with(path + ".")) {
            return true;
        }
    }
    return false;
}

std::string Document::where(const YAML::Mark &mark, const std::string &path) const
{
    if (from_override(mark, path)) {
        return "(from -o)";
    }
    if (mark.is_null()) {
        return name_;
    }
    return name_ + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

void Document::remember_key(const std::string &path, const YAML::Mark &mark)
{
    key_marks_.insert_or_assign(path, mark);
}

Error Document::error(const YAML::Node &node, const std::string &path, const std::string &message) const
{
    YAML::Mark mark = node.Mark();
    if (node.IsNull()) { // yaml-cpp puts an empty value at the next token: point at its key instead
        const auto key = key_marks_.find(path);
        if (key != key_marks_.end()) {
            mark = key->second;
        }
    }
    return error_at(where(mark, path), path, message);
}

Error Document::error_at(const std::string &where, const std::string &path, const std::string &message) const
{
    return fail(where + ": " + (path.empty() ? "" : path + ": ") + message);
}

Error Document::invalid(const YAML::Node &node, const std::string &path, const Text &text,
                        std::string_view expected, std::string_view reason) const
{
    return error(node, path,
                 text.shown + " is not a valid value" + (reason.empty() ? "" : ": " + std::string(reason)) +
                     " (expected " + std::string(expected) + ")");
}

Error Document::out_of_range(const YAML::Node &node, const std::string &path, const Text &text,
                             std::string_view expected) const
{
    return error(node, path, text.shown + " is out of range (expected " + std::string(expected) + ")");
}

Result<> Document::key_utf8(const YAML::Node &node, const std::string &path, std::string_view what) const
{
    const std::string &key = node.Scalar();
    if (const std::size_t bad = invalid_utf8_at(key); bad != std::string::npos)
        return error(node, path, std::string(what) + " " + not_utf8(key, bad));
    return {};
}

void Document::warn(const YAML::Mark &mark, const std::string &path, const std::string &message, bool strict)
{
    warnings_.push_back(where(mark, path) + ": " + message);
    if (strict) {
        strict_.push_back(warnings_.back());
    }
}

Result<Document::Text> Document::text(const YAML::Node &node, const std::string &path,
                                      std::string_view expected) const
{
    if (!node.IsScalar()) {
        const std::string what = node.IsNull() ? "no value given" : describe(node) + " is not a valid value";
        return error(node, path, what + " (expected " + std::string(expected) + ")");
    }
    const std::string &raw = node.Scalar();
    Result<std::string> expanded = expand_env(raw, env_);
    if (!expanded) {
        return error(node, path, quote(raw) + ": " + expanded.error().message);
    }
    if (const std::size_t bad = invalid_utf8_at(*expanded); bad != std::string::npos) {
        std::string message = not_utf8(*expanded, bad);
        if (*expanded != raw)
            message += " (expanded from \"" + printable(raw, 200) + "\")";
        return error(node, path, message);
    }
    Text t{std::move(*expanded), {}};
    t.shown = quote(t.value);
    if (t.value != raw) {
        t.shown += " (expanded from " + quote(raw) + ")";
    }
    return t;
}

} // namespace detail

// ---- loading --------------------------------------------------------------------------------------

Result<std::vector<std::string>> schema::load(const Section &section, void *object, const std::string &yaml,
                                              const std::string &name,
                                              const std::vector<std::string> &overrides, const EnvLookup &env,
                                              std::vector<std::string> *strict)
{
    Result<std::vector<Override>> parsed = parse_overrides(overrides);
    if (!parsed) {
        return parsed.error();
    }
    std::vector<std::string> overridden;
    for (const Override &o : *parsed) {
        overridden.push_back(o.path);
    }
    YAML::Node root;
    try { // yaml-cpp reports a syntax error by throwing: it becomes a value here, where it is raised
        root = YAML::Load(yaml);
    } catch (const YAML::ParserException &e) {
        return fail(name + ":" + std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1) +
                    ": YAML syntax error: " + e.msg);
    }
    conf::detail::Document doc(name, env, std::move(overridden));
    try {
        if (!parsed->empty()) {
            if (Result<> applied = apply_overrides(doc, root, *parsed); !applied) {
                return applied.error();
            }
        }
        if (Result<> read = conf::detail::read_document(doc, root, section, object); !read) {
            return read.error();
        }
    } catch (const YAML::Exception &e) {
        // Not a config error (those are returned) but yaml-cpp refusing a node it handed out: a bug, still
        // reported as a message naming the file rather than as a crash.
        return fail(name + ": " + e.what());
    }
    if (strict != nullptr) {
        *strict = doc.take_strict();
    }
    return doc.take_warnings();
}

} // namespace ferry::conf
