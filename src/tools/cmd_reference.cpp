// Placeholder until the real command lands.
#include "tools/commands.h"
#include "util/error.h"

namespace deltagen {

int cmd_reference(int, char**) { fail("reference", "not implemented yet"); }

}  // namespace deltagen
