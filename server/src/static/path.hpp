// The file a request path names under the static root (internal to server/): percent-decoded and
// normalised, with everything that could leave the root or reach a hidden file refused before any file
// system call. The kernel then enforces the root once more when the file is opened (file_cache.cpp).
#pragma once

#include "ferry/conf/config.hpp"

#include <string>
#include <string_view>

namespace ferry::server::detail {

struct StaticPath {
    enum class Kind {
        ok,        // `rel` names a file or directory under the root
        traversal, // "..", an encoded slash or backslash, NUL or another control byte, a bad escape: 403
        hidden,    // a segment starting with "." (.env, .git/): never served
    };
    Kind kind = Kind::ok;
    std::string rel;             // "css/site.css"; "" is the root itself
    bool trailing_slash = false; // the path ends in "/" (a directory's index, no redirect)
};

// `target` is the request target as received (origin-form or absolute-form).
StaticPath resolve_static_path(std::string_view target);

// ".css" of "css/site.CSS", lower-cased; "" without an extension (or for a dotfile's own name).
std::string extension_of(std::string_view path);

// http.static.forbid and http.static.allow: whether a file named `path` is refused by its extension.
bool extension_denied(const conf::StaticConfig &config, std::string_view path);

// Whether a path ("css/site.css", "/srv/www/.git/config") has a segment starting with "." (a hidden file or
// directory on the way).
bool has_hidden_segment(std::string_view path);

// The path part of a request target ("/a/b" of "/a/b?x" or "http://h/a/b?x"), still percent-encoded.
std::string_view target_path(std::string_view target);

} // namespace ferry::server::detail
