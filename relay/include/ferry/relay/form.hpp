// A parsed form as PHP's $_POST holds it (docs/protocol.md §3): a tree of ordered arrays whose leaves are
// strings, built with PHP's naming rules, and its encoding as the body of a request frame with
// `parsed: true` in the worker's codec.
#pragma once

#include "ferry/conf/result.hpp"
#include "ferry/relay/context.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::relay {

struct FormNode {
    bool array = false;
    std::string value;                                   // a leaf's value
    std::vector<std::pair<std::string, FormNode>> items; // an array's entries, in insertion order
    std::int64_t next_index = 0;                         // the key `name[]` appends with

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

    const FormNode &root() const { return root_; }
    std::size_t fields() const { return fields_; }
    bool empty() const { return root_.items.empty(); }
    void clear();

private:
    FormLimits limits_;
    FormNode root_;
    std::size_t fields_ = 0;
};

// Appends the tree in the codec: JSON ({} when empty) or msgpack. Arrays with keys 0..n-1 in order are
// lists, other arrays maps with string keys.
void encode_form(const FormTree &form, Codec codec, std::string &out);

} // namespace ferry::relay
