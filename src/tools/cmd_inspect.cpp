// Placeholder until the real command lands.
#include "tools/commands.h"
#include "util/error.h"

namespace deltagen {

int cmd_inspect(int, char**) { fail("inspect", "not implemented yet"); }

}  // namespace deltagen
