// The capabilities this server advertises and serves, derived from what the backend reports
// (backend/features.h) and the probe saw: the one place a feature is switched on.
#pragma once

#include "backend/features.h"
#include "protocol/capabilities.h"

namespace server {

protocol::Capabilities derive_capabilities(const backend::Features& features);

}  // namespace server
