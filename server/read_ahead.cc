#include "server/read_ahead.h"

namespace server {

std::optional<protocol::ReadMemory> ReadAhead::next_after(const protocol::ReadMemory& request) {
  if (request.length < kMinLength) return std::nullopt;
  if (request.addr + request.length < request.addr) return std::nullopt;  // wraps
  protocol::ReadMemory next = request;
  next.addr = request.addr + request.length;
  return next;
}

void ReadAhead::keep(const protocol::ReadMemory& request, std::string payload, std::string framed) {
  kept_ = Kept{request, {std::move(payload), std::move(framed)}};
}

std::optional<ReadAhead::Prepared> ReadAhead::take(const protocol::ReadMemory& request) {
  if (!kept_) return std::nullopt;
  Kept kept = std::move(*kept_);
  kept_.reset();
  const auto& k = kept.request;
  if (k.addr != request.addr || k.length != request.length || k.binary != request.binary) return std::nullopt;
  return std::move(kept.reply);
}

}  // namespace server
