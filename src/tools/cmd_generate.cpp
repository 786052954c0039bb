// Placeholder until the real command lands.
#include "tools/commands.h"
#include "util/error.h"

namespace deltagen {

int cmd_generate(int, char**) { fail("generate", "not implemented yet"); }

}  // namespace deltagen
