// parse_urlencoded into a FormTree (PHP's naming rules, nesting, the field and depth limits), then the tree
// in JSON and msgpack, each parsed back.
#include "form_check.hpp"

#include "forms/urlencoded.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size)
{
    fuzz::Input in(data, size);
    ferry::relay::FormLimits limits;
    if (in.byte() & 1) {
        limits.max_fields = 8;
        limits.max_depth = 3;
    }
    ferry::relay::FormTree form(limits);
    auto r = ferry::server::detail::parse_urlencoded(in.rest(), form);
    if (!r)
        FUZZ_CHECK(!r.error().message.empty());
    FUZZ_CHECK(form.fields() <= limits.max_fields);
    fuzz::check_form_encodings(form);
    (void)ferry::server::detail::is_urlencoded(in.rest());
    return 0;
}
