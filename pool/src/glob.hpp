// Path globs for the file watcher (internal to pool/): "**/*.php", "src/**", "*.{php,twig}", "[a-z]*.php".
// Matching is glibc's fnmatch(3) on each path segment (FNM_PERIOD off: dot files match "*"); what fnmatch
// lacks is added here: "**" as a whole segment matches any number of segments (none included), and {a,b}
// alternatives are expanded first (nested braces too). A pattern without '/' matches a file's name at any
// depth, as in .gitignore; one with '/' matches the path relative to the watched directory. A RoadRunner 2.x
// suffix (".php", no glob character) means "*.php".
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ferry::pool::detail {

class Glob {
public:
    explicit Glob(std::string_view pattern);
    // `path`: relative to the watched directory, '/'-separated, no leading "./".
    bool match(std::string_view path) const;
    const std::string &pattern() const { return pattern_; }

private:
    std::string pattern_;
    bool anywhere_ = false; // no '/' in the pattern: matched against the file name
    std::vector<std::vector<std::string>> alternatives_; // brace-expanded, split into segments
};

// {a,b} expansion: "x.{php,twig}" -> "x.php", "x.twig"; unbalanced braces are kept as they are.
std::vector<std::string> expand_braces(std::string_view pattern);

} // namespace ferry::pool::detail
