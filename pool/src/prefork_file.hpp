// The PHP-level fork template's file (internal to pool/; docs/protocol.md §8.1): the embedded prefork.php
// written to a directory of its own (mode 0700) under the Host's temporary directory, removed with it.
#pragma once

#include <string>

namespace ferry::pool::detail {

struct PreforkFile {
    explicit PreforkFile(const std::string &tmp_dir);
    ~PreforkFile();
    PreforkFile(const PreforkFile &) = delete;
    PreforkFile &operator=(const PreforkFile &) = delete;

    std::string dir, path, error; // error: why it could not be written (path is then not usable)
};

} // namespace ferry::pool::detail
