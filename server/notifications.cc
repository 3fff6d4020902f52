#include "server/notifications.h"

namespace server {

bool StopNotifications::push(std::string reply) {
  queue_.push_back(std::move(reply));
  return queue_.size() == 1;
}

std::optional<std::string> StopNotifications::acknowledge() {
  if (!queue_.empty()) queue_.pop_front();
  if (queue_.empty()) return std::nullopt;
  return queue_.front();
}

std::optional<std::string> StopNotifications::restart(std::vector<std::string> replies) {
  queue_.assign(std::make_move_iterator(replies.begin()), std::make_move_iterator(replies.end()));
  if (queue_.empty()) return std::nullopt;
  return queue_.front();
}

}  // namespace server
