#include "ferry/relay/form.hpp"

#include "context_codec.hpp"

#include <charconv>
#include <optional>

namespace ferry::relay {

FormNode::FormNode() = default;
namespace {

// PHP's integer-like array keys: "0", "-3", "42", not "05", "+1", "1.0", " 1" or beyond int64.
bool integer_key(std::string_view k, std::int64_t &n)
{
    if (k.empty() || k.size() > 20)
        return false;
    std::string_view digits = k.front() == '-' ? k.substr(1) : k;
    if (digits.empty() || (digits.size() > 1 && digits.front() == '0') || (k.front() == '-' && digits == "0"))
        return false;
    auto [p, ec] = std::from_chars(k.data(), k.data() + k.size(), n);
    return ec == std::errc() && p == k.data() + k.size();
}

FormNode *find(FormNode &parent, std::string_view name)
{
    for (auto &[k, node] : parent.items)
        if (k == name)
            return &node;
    return nullptr;
}

// The entry `key` of `parent` (made an array), created when new; "[]" (key.data() == nullptr) appends.
// nullptr: no key is left to append with (INT64_MAX is taken), and PHP drops the field.
FormNode *child(FormNode &parent, std::string_view key)
{
    if (!parent.array) { // a leaf (or nothing) where an array is needed: PHP replaces it
        parent = FormNode{};
        parent.array = true;
    }
    std::string name;
    std::optional<std::int64_t> index; // an integer key
    if (key.data() == nullptr) {       // "[]": the next integer key (zend_hash_next_index_insert)
        index = parent.next_index == INT64_MIN ? 0 : parent.next_index;
        name = std::to_string(*index);
        if (*index == INT64_MAX && find(parent, name) != nullptr)
            return nullptr;
    } else {
        name.assign(key);
        if (std::int64_t n = 0; integer_key(key, n))
            index = n;
        if (FormNode *existing = find(parent, name))
            return existing;
    }
    if (index && *index >= parent.next_index)
        parent.next_index = *index == INT64_MAX ? *index : *index + 1;
    parent.items.emplace_back(std::move(name), FormNode{});
    return &parent.items.back().second;
}

} // namespace

bool FormNode::is_list() const
{
    std::size_t i = 0;
    char digits[24];
    for (const auto &[k, v] : items) {
        (void)v;
        auto end = std::to_chars(digits, digits + sizeof digits, i++).ptr; // no allocation per key
        if (k != std::string_view(digits, static_cast<std::size_t>(end - digits)))
            return false;
    }
    return true;
}

void FormTree::clear()
{
    root_ = FormNode{};
    root_.array = true;
    fields_ = 0;
    files_.clear();
}

Result<void> FormTree::add(std::string_view name, std::string_view value)
{
    auto node = leaf(name);
    if (!node)
        return node.error();
    if (*node)
        (*node)->value.assign(value);
    return {};
}

Result<void> FormTree::add_file(std::string_view name, UploadedFile file)
{
    auto node = leaf(name);
    if (!node)
        return node.error();
    if (*node) {
        (*node)->file = static_cast<int>(files_.size());
        files_.push_back(std::move(file));
    }
    return {};
}

Result<FormNode *> FormTree::leaf(std::string_view name)
{
    if (fields_ >= limits_.max_fields)
        return fail("more than " + std::to_string(limits_.max_fields) + " form fields (the limit is " +
                    std::string(limits_.fields_key) + ")");
    ++fields_;
    while (!name.empty() && name.front() == ' ')
        name.remove_prefix(1);
    // The base name, up to the first "[" that has a "]" after it.
    std::size_t open = name.find('[');
    std::string base;
    std::string_view rest;
    for (std::size_t i = 0; i < name.size(); ++i) {
        char c = name[i];
        if (c == '[' && i == open) {
            if (name.find(']', i) != std::string_view::npos) {
                rest = name.substr(i);
                break;
            }
            base += '_'; // an unclosed "[": PHP keeps the rest as part of the name
            base.append(name.substr(i + 1));
            break;
        }
        base += (c == ' ' || c == '.') ? '_' : c;
    }
    if (base.empty())
        return static_cast<FormNode *>(nullptr); // ignored, as PHP does
    FormNode *node = child(root_, base);         // a named key: never dropped
    std::size_t depth = 0;
    while (!rest.empty() && rest.front() == '[') {
        std::size_t close = rest.find(']');
        if (close == std::string_view::npos)
            break; // an unclosed "[" after a closed one: the rest is ignored
        if (++depth > limits_.max_depth)
            return fail("form field name nested deeper than " + std::to_string(limits_.max_depth) +
                        " levels (the limit is " + std::string(limits_.depth_key) + ")");
        // "[]" and "[ ]" append; any other key is kept whole, its leading whitespace too (as PHP does).
        std::string_view key = rest.substr(1, close - 1);
        if (key.find_first_not_of(" \t\r\n") == std::string_view::npos)
            key = std::string_view();
        node = child(*node, key);
        if (node == nullptr)
            return node; // "[]" past INT64_MAX: dropped, as PHP does
        rest = rest.substr(close + 1);
    }
    *node = FormNode{};
    return node;
}

void encode_form(const FormTree &form, Codec codec, std::string &out)
{
    if (codec == Codec::json)
        detail::encode_form_json(form, out);
    else
        detail::encode_form_msgpack(form, out);
}

} // namespace ferry::relay
