// The filter functions behind apply_filter (builtins.h), split by what they
// work on. Internal to src/chat/jinja.
#pragma once
#include <string_view>

#include "chat/jinja/builtins.h"

namespace deltagen::jinja::filters {

using Filter = Value (*)(Interpreter& in, const Value& operand, const Args& args);

// filters_text.cpp: strings and numbers
Value abs(Interpreter&, const Value&, const Args&);
Value capitalize(Interpreter&, const Value&, const Args&);
Value center(Interpreter&, const Value&, const Args&);
Value default_value(Interpreter&, const Value&, const Args&);
Value escape(Interpreter&, const Value&, const Args&);
Value forceescape(Interpreter&, const Value&, const Args&);
Value to_float(Interpreter&, const Value&, const Args&);
Value format(Interpreter&, const Value&, const Args&);
Value indent(Interpreter&, const Value&, const Args&);
Value to_int(Interpreter&, const Value&, const Args&);
Value length(Interpreter&, const Value&, const Args&);
Value lower(Interpreter&, const Value&, const Args&);
Value replace(Interpreter&, const Value&, const Args&);
Value round(Interpreter&, const Value&, const Args&);
Value safe(Interpreter&, const Value&, const Args&);
Value string(Interpreter&, const Value&, const Args&);
Value title(Interpreter&, const Value&, const Args&);
Value tojson(Interpreter&, const Value&, const Args&);
Value trim(Interpreter&, const Value&, const Args&);
Value truncate(Interpreter&, const Value&, const Args&);
Value upper(Interpreter&, const Value&, const Args&);
Value wordcount(Interpreter&, const Value&, const Args&);

// filters_seq.cpp: sequences and mappings
Value attr(Interpreter&, const Value&, const Args&);
Value batch(Interpreter&, const Value&, const Args&);
Value dictsort(Interpreter&, const Value&, const Args&);
Value first(Interpreter&, const Value&, const Args&);
Value items(Interpreter&, const Value&, const Args&);
Value join(Interpreter&, const Value&, const Args&);
Value last(Interpreter&, const Value&, const Args&);
Value list(Interpreter&, const Value&, const Args&);
Value map(Interpreter&, const Value&, const Args&);
Value max(Interpreter&, const Value&, const Args&);
Value min(Interpreter&, const Value&, const Args&);
Value reject(Interpreter&, const Value&, const Args&);
Value rejectattr(Interpreter&, const Value&, const Args&);
Value reverse(Interpreter&, const Value&, const Args&);
Value select(Interpreter&, const Value&, const Args&);
Value selectattr(Interpreter&, const Value&, const Args&);
Value slice(Interpreter&, const Value&, const Args&);
Value sort(Interpreter&, const Value&, const Args&);
Value sum(Interpreter&, const Value&, const Args&);
Value unique(Interpreter&, const Value&, const Args&);

// What the filters share: Python's str() that keeps Markup (markupsafe's soft_str).
Value soft_str(Interpreter& in, const Value& v);
// The items of an iterable (iterate()), counted as work.
List walk(Interpreter& in, const Value& v);

}  // namespace deltagen::jinja::filters
