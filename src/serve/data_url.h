// Images sent to the server inline, as data: URLs (RFC 2397) holding base64:
// "data:image/png;base64,iVBORw0...". The server fetches nothing: any other
// URL is refused.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace deltagen::serve {

// Standard base64 (RFC 4648 section 4), strictly: the alphabet only, no
// whitespace, a length that is a multiple of 4, '=' only as the last one or
// two characters, and zero bits after the last byte. Throws Error("<what>:
// ...") on anything else.
std::vector<uint8_t> decode_base64(std::string_view text, const std::string& what);

// The bytes of a "data:image/<type>;base64,<data>" URL, at most `max_bytes`
// decoded. Throws ApiError 400 naming `field` for any other URL (http, https,
// file, a data: URL without base64 or of another media type) or bad base64,
// and 413 when the image is larger than max_bytes.
std::vector<uint8_t> image_from_data_url(std::string_view url, const std::string& field, int64_t max_bytes);

}  // namespace deltagen::serve
