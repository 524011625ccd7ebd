// .env files (include/ferry/conf/dotenv.hpp). Written here rather than taken from a package: Debian has no
// C or C++ dotenv library, and the syntax is a few lines of rules.
#include "ferry/conf/dotenv.hpp"

#include "ferry/base/text.hpp"
#include "file.hpp"

#include <cstdint>
#include <cstdlib>

namespace ferry::conf {

namespace {

constexpr std::uint64_t max_dotenv_size = 1 << 20; // a .env file holds settings, not data

bool name_char(char c, bool first)
{
    return c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (!first && c >= '0' && c <= '9');
}

bool blank(char c)
{
    return c == ' ' || c == '\t';
}

} // namespace

Result<DotenvVars> parse_dotenv(std::string_view text, const std::string &name)
{
    DotenvVars out;
    std::size_t i = 0, line = 1;
    const auto skip_blanks = [&] {
        while (i < text.size() && blank(text[i]))
            ++i;
    };
    const auto rest_of_line = [&](std::size_t from) {
        const std::size_t nl = text.find('\n', from);
        std::string_view l =
            text.substr(from, nl == std::string_view::npos ? std::string_view::npos : nl - from);
        if (!l.empty() && l.back() == '\r')
            l.remove_suffix(1);
        return l;
    };
    const auto error = [&](std::size_t at, const std::string &what) {
        return fail(name + ":" + std::to_string(at) + ": " + what);
    };
    while (i < text.size()) {
        skip_blanks();
        if (i >= text.size())
            break;
        if (text[i] == '\n' || text[i] == '\r' || text[i] == '#') { // an empty line or a comment
            const std::size_t nl = text.find('\n', i);
            i = nl == std::string_view::npos ? text.size() : nl + 1;
            line += nl == std::string_view::npos ? 0 : 1;
            continue;
        }
        const std::size_t start = i, start_line = line;
        if (text.substr(i, 7) == "export " || text.substr(i, 7) == "export\t") {
            i += 7;
            skip_blanks();
        }
        const std::size_t name_start = i;
        while (i < text.size() && name_char(text[i], i == name_start))
            ++i;
        std::string key(text.substr(name_start, i - name_start));
        skip_blanks();
        if (key.empty() || i >= text.size() || text[i] != '=')
            return error(start_line, "expected NAME=value, got \"" + printable(rest_of_line(start)) + "\"");
        ++i;
        skip_blanks();
        std::string value;
        if (i < text.size() && (text[i] == '"' || text[i] == '\'')) {
            const char quote = text[i++];
            bool closed = false;
            for (; i < text.size(); ++i) { // up to the closing quote, over several lines if need be
                const char c = text[i];
                if (c == quote) {
                    closed = true;
                    ++i;
                    break;
                }
                if (c == '\n')
                    ++line;
                if (quote == '"' && c == '\\' && i + 1 < text.size()) {
                    const char e = text[++i];
                    value += e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
                    continue;
                }
                value += c;
            }
            if (!closed)
                return error(start_line, "the value of " + key + " has no closing " + std::string(1, quote));
            std::string_view after = rest_of_line(i);
            while (!after.empty() && blank(after.front()))
                after.remove_prefix(1);
            if (!after.empty() && after.front() != '#')
                return error(line, "text after the closing quote of " + key + "'s value: \"" +
                                       printable(after) + "\"");
        } else {
            std::string_view v = rest_of_line(i);
            for (std::size_t k = 1; k < v.size(); ++k) // " # comment" ends it; a # inside a word does not
                if (v[k] == '#' && blank(v[k - 1])) {
                    v = v.substr(0, k);
                    break;
                }
            while (!v.empty() && blank(v.back()))
                v.remove_suffix(1);
            value = std::string(v);
        }
        const std::size_t nl = text.find('\n', i);
        i = nl == std::string_view::npos ? text.size() : nl + 1;
        line += nl == std::string_view::npos ? 0 : 1;
        out.emplace_back(std::move(key), std::move(value));
    }
    return out;
}

Result<std::vector<std::string>> load_dotenv(const std::string &path)
{
    auto text = detail::read_regular_file(path, max_dotenv_size, "cannot read " + path + ": ", "a .env file");
    if (!text)
        return text.error();
    auto vars = parse_dotenv(*text, path);
    if (!vars)
        return vars.error();
    std::vector<std::string> set;
    for (const auto &[key, value] : *vars) {
        if (std::getenv(key.c_str()) != nullptr)
            continue; // the environment wins
        ::setenv(key.c_str(), value.c_str(), 1);
        set.push_back(key);
    }
    return set;
}

} // namespace ferry::conf
