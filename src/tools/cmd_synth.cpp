// Placeholder until the real command lands.
#include "tools/commands.h"
#include "util/error.h"

namespace deltagen {

int cmd_synth(int, char**) { fail("synth", "not implemented yet"); }

}  // namespace deltagen
