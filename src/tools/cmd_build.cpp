// Placeholder until the real command lands.
#include "tools/commands.h"
#include "util/error.h"

namespace deltagen {

int cmd_build(int, char**) { fail("build", "not implemented yet"); }

}  // namespace deltagen
