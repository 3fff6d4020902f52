// Typed requests: what a client asked for, parsed from one packet payload. The protocol
// layer turns bytes into one of these; the server dispatches on the type.
//
// The packets are grouped by family, as the handlers are (server/handlers/<family>.cc):
// protocol/packets/<family>.h holds a family's request structs and lists them; its .cc holds
// their parsers and table rows. Adding a packet = one struct (and its entry in the family's
// PacketList), one row and parse function in the family's .cc, one handler, one test.
// This header gathers every family, the Request variant and parse_request().
#pragma once

#include <string_view>

#include "protocol/capabilities.h"
#include "protocol/packets/request.h"
#include "protocol/thread_id.h"

namespace protocol {

// Parse one unescaped packet payload (the bytes between '$' and '#', with '}' escapes already
// removed by the framer). Never throws; bad arguments give Malformed, unknown names Unknown,
// and so does a packet (or qXfer object) whose capability the server does not have.
Request parse_request(std::string_view payload, const Capabilities& capabilities);
// Every capability: what the packet table can parse at all (parser tests, fuzzing).
Request parse_request(std::string_view payload);

}  // namespace protocol
