// Placeholder until the real command lands.
#include "tools/commands.h"
#include "util/error.h"

namespace deltagen {

int cmd_tokenize(int, char**) { fail("tokenize", "not implemented yet"); }

}  // namespace deltagen
