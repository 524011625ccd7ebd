// A parsed form as PHP's $_POST holds it (docs/protocol.md §3): a tree of ordered arrays whose leaves are
// strings, built with PHP's naming rules, and its encoding as the body of a request frame with
// `parsed: true` in the worker's codec.
#pragma once

#include "ferry/base/result.hpp"
#include "ferry/relay/context.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::relay {

// An uploaded file as PHP's $_FILES describes it (docs/protocol.md §3).
struct UploadedFile {
    std::string name; // the client's file name (base name only)
    std::string mime; // the part's Content-Type
    std::uint64_t size = 0;
    int error = 0;        // UPLOAD_ERR_*: 0 ok, 1 too large, 4 no file, 7 cannot write, 8 extension forbidden
    std::string tmp_name; // the temp file ("" unless error is 0)
};

struct FormNode {
    bool array = false;
    int file = -1;                                       // a file leaf: index in FormTree::files()
    std::string value;                                   // a leaf's value
    std::vector<std::pair<std::string, FormNode>> items; // an array's entries, in insertion order
    // The key `name[]` appends with, as PHP's nNextFreeElement: INT64_MIN until a key is set (then 0), one
    // past the largest integer key, and held at INT64_MAX: once that key is taken, an append is dropped.
    std::int64_t next_index = INT64_MIN;

    // Declared here, defaulted in form.cpp: clang 14 with libstdc++ 12 cannot define the implicit default
    // constructor inline (it checks std::pair<std::string, FormNode> while FormNode is still incomplete).
    FormNode();

    // An array whose keys are exactly 0, 1, 2... in order: a JSON array / msgpack array.
    bool is_list() const;
};

struct FormLimits {
    std::size_t max_fields = 1000; // like PHP's max_input_vars
    std::size_t max_depth = 64;    // brackets per name, like PHP's max_input_nesting_level
    // How errors name the limits (the config keys that set them).
    std::string_view fields_key = "max_fields", depth_key = "max_depth";
};

class FormTree {
public:
    explicit FormTree(FormLimits limits = {}) : limits_(limits) { root_.array = true; }

    // Adds one field by PHP's rules: leading spaces dropped; in the name before the first "[", " " and
    // "." become "_"; "a[]" appends, "a[k]" sets key k ("5" is the integer key 5), "a[x][y]" nests; after a
    // "]" anything but "[" is ignored; an unclosed "[" in the base name becomes "_" (`a[b` is `a_b`). An
    // empty base name is ignored, as PHP does. Beyond the limits: an error naming the limit (PHP would drop
    // the field silently).
    Result<void> add(std::string_view name, std::string_view value);
    // The same, for an uploaded file (the uploads tree of a multipart form).
    Result<void> add_file(std::string_view name, UploadedFile file);

    const FormNode &root() const { return root_; }
    const std::vector<UploadedFile> &files() const { return files_; }
    std::size_t fields() const { return fields_; }
    bool empty() const { return root_.items.empty(); }
    void clear();

private:
    FormLimits limits_;
    Result<FormNode *> leaf(std::string_view name); // the node `name` designates, made a fresh leaf
    FormNode root_;
    std::size_t fields_ = 0;
    std::vector<UploadedFile> files_;
};

// Appends the tree in the codec: JSON ({} when empty) or msgpack. Arrays with keys 0..n-1 in order are
// lists, other arrays maps with string keys.
void encode_form(const FormTree &form, Codec codec, std::string &out);

} // namespace ferry::relay
