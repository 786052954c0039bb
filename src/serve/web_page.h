// The web chat page served at / (src/serve/web/chat.html, compiled into the
// binary by CMake: no files to install, nothing fetched from a CDN).
#pragma once
#include <string_view>

namespace deltagen::serve {

std::string_view chat_page_html();

}  // namespace deltagen::serve
